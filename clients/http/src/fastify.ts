import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { type RateLimitCheckOptions, type RateLimitDenial, rateLimitCheck } from './rate-limit-check.js';
import { settleAfterResponse } from './refund.js';

export interface FastifyRateLimitOptions extends RateLimitCheckOptions<FastifyRequest> {
  /**
   * Answers a 429 instead of the default writer: it must send the reply. The
   * headers (Retry-After, RateLimit, legacy headers when on) are already set;
   * `denial` carries the decision, the default status and the body `message`
   * made. The route handler does not run.
   */
  handler?: (request: FastifyRequest, reply: FastifyReply, denial: RateLimitDenial) => unknown;
}

/**
 * A Fastify hook (use it as onRequest, or preHandler when `identify` needs the
 * parsed body): denied: 429 (or 503 when the limiter is unavailable under
 * fail_closed) with the JSON body and headers, and the route handler does not
 * run; input the quota service refuses: 400 invalid_request, the route does
 * not run either; allowed: the RateLimit headers, then the route.
 */
export function fastifyRateLimit(options: FastifyRateLimitOptions): onRequestHookHandler {
  const check = rateLimitCheck(options);
  const { handler } = options;
  return async function rateLimit(request: FastifyRequest, reply: FastifyReply) {
    const outcome = await check(request);
    reply.headers(outcome.headers);
    if (outcome.action === 'continue') {
      if (outcome.reservation !== undefined) settleAfterResponse(options, request, outcome.reservation, reply.raw);
      return;
    }
    if (outcome.status === 429 && handler !== undefined) {
      await handler(request, reply, outcome);
      return reply;
    }
    return reply.code(outcome.status).send(outcome.body);
  };
}
