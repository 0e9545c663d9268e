import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { rateLimitCheck, type RateLimitCheckOptions } from './rate-limit-check.js';

/**
 * A Fastify hook (use it as onRequest, or preHandler when `identify` needs the
 * parsed body): denied: 429 (or 503 when the limiter is unavailable under
 * fail_closed) with the JSON body and headers, and the route handler does not
 * run; input the quota service refuses: 400 invalid_request, the route does
 * not run either; allowed: the RateLimit headers, then the route.
 */
export function fastifyRateLimit(options: RateLimitCheckOptions<FastifyRequest>): onRequestHookHandler {
  const check = rateLimitCheck(options);
  return async function rateLimit(request: FastifyRequest, reply: FastifyReply) {
    const outcome = await check(request);
    reply.headers(outcome.headers);
    if (outcome.action === 'respond') return reply.code(outcome.status).send(outcome.body);
  };
}
