import { type AllowParams, type Decision as QuotaDecision, type QuotaDecider, rateLimitHeaders, retryAfterSeconds } from '@quota-service/core';
import { invalidInputBody, type InvalidRequestBody } from './invalid-input.js';

/**
 * What the adapter does with a request: let it through (with headers) or
 * answer it here: 429 or 503 from a decision, 400 when the quota service
 * refused the request's input (no decision then).
 */
export type RateLimitOutcome =
  | { action: 'continue'; headers: Record<string, string>; decision: QuotaDecision | undefined }
  | { action: 'respond'; status: 429 | 503; headers: Record<string, string>; body: RateLimitErrorBody; decision: QuotaDecision }
  | { action: 'respond'; status: 400; headers: Record<string, string>; body: InvalidRequestBody; decision: undefined };

export interface RateLimitErrorBody {
  error: 'rate_limit_exceeded' | 'rate_limiter_unavailable';
  message: string;
  /** The policy that was asked. */
  policy: string;
  retry_after_ms: number;
  /** The limit of the policy that rejected ('' when the limiter was unavailable). */
  limit: string;
}

export interface RateLimitCheckOptions<Req> {
  /** The quota client (createQuotaClient), or anything with its allow(). */
  client: QuotaDecider;
  /** Policy name, or a function of the request. */
  policy: string | ((request: Req) => string);
  /**
   * The identity to count, from the principal YOUR authentication established
   * (e.g. { user: req.user.id, tenant: req.user.tenant }) or the client IP
   * (clientIp()), never from a header or body the client chose. Returning
   * undefined skips this check for the request (e.g. an IP limit that only
   * applies to unauthenticated traffic).
   */
  identify: (request: Req) => Record<string, string> | undefined;
  /** Units the request spends; default 1. */
  cost?: (request: Req) => number;
  /** Idempotency key for AllowRequest.request_id, if the app has one. */
  requestId?: (request: Req) => string | undefined;
}

/**
 * The framework-neutral check the Express and Fastify adapters share: ask the
 * quota service, then map the decision to HTTP. Input the quota service
 * refuses (INVALID_ARGUMENT: an identity value too long or with control
 * characters, a bad cost) is a 400 invalid_request naming the field. Any other
 * QuotaRequestError (unknown policy, permission denied: a bug in the app or
 * its deployment) is thrown for the framework's error handler. Neither ever
 * becomes a 429 or a pass.
 */
export function rateLimitCheck<Req>(options: RateLimitCheckOptions<Req>): (request: Req) => Promise<RateLimitOutcome> {
  return async (request) => {
    const identity = options.identify(request);
    if (identity === undefined) return { action: 'continue', headers: {}, decision: undefined };
    const policy = typeof options.policy === 'string' ? options.policy : options.policy(request);
    const params: AllowParams = { policy, identity };
    const cost = options.cost?.(request);
    if (cost !== undefined) params.cost = cost;
    const requestId = options.requestId?.(request);
    if (requestId !== undefined) params.requestId = requestId;
    let decision: QuotaDecision;
    try {
      decision = await options.client.allow(params);
    } catch (error) {
      const body = invalidInputBody(error);
      if (body === undefined) throw error;
      return { action: 'respond', status: 400, headers: {}, body, decision: undefined };
    }
    return toOutcome(policy, decision);
  };
}

export function toOutcome(policy: string, decision: QuotaDecision): RateLimitOutcome {
  const headers = rateLimitHeaders(decision);
  if (decision.allowed) return { action: 'continue', headers, decision };
  const seconds = retryAfterSeconds(decision.retryAfterMs);
  headers['Retry-After'] = String(seconds);
  if (decision.source === 'fail_closed') {
    return {
      action: 'respond',
      status: 503,
      headers,
      decision,
      body: {
        error: 'rate_limiter_unavailable',
        message: `The rate limiter is unavailable and this endpoint does not proceed without it; try again in ${seconds} s.`,
        policy,
        retry_after_ms: decision.retryAfterMs,
        limit: '',
      },
    };
  }
  return {
    action: 'respond',
    status: 429,
    headers,
    decision,
    body: {
      error: 'rate_limit_exceeded',
      message: `Too many requests: limit "${decision.deniedBy}" of policy "${policy}" is used up; try again in ${seconds} s.`,
      policy,
      retry_after_ms: decision.retryAfterMs,
      limit: decision.deniedBy,
    },
  };
}
