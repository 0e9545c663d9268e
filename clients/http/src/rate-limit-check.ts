import {
  type AllowParams,
  type Decision as QuotaDecision,
  type QuotaDecider,
  type QuotaReservation,
  type QuotaReserver,
  rateLimitHeaders,
  retryAfterSeconds,
} from '@quota-service/core';
import { invalidInputBody, type InvalidRequestBody } from './invalid-input.js';
import { legacyRateLimitHeaders } from './legacy-headers.js';
import type { RefundResult } from './refund.js';

/**
 * What the adapter does with a request: let it through (with headers) or
 * answer it here: 429 or 503 from a decision, 400 when the quota service
 * refused the request's input (no decision then).
 */
export type RateLimitOutcome = RateLimitPass | RateLimitDenial | RateLimitInvalidInput;

export interface RateLimitPass {
  action: 'continue';
  headers: Record<string, string>;
  /** undefined when `skip` or `identify` let the request through without asking. */
  decision: QuotaDecision | undefined;
  /**
   * With skipFailedRequests or skipSuccessfulRequests: the reservation the
   * request's unit was spent on (only when the service counted it), to settle
   * at 0 once the response's status is known (settleAfterResponse).
   */
  reservation?: QuotaReservation;
}

export interface RateLimitDenial {
  action: 'respond';
  status: 429 | 503;
  headers: Record<string, string>;
  /** The default JSON body, or the 429 body `message` made. */
  body: RateLimitErrorBody | DenialBody;
  decision: QuotaDecision;
}

export interface RateLimitInvalidInput {
  action: 'respond';
  status: 400;
  headers: Record<string, string>;
  body: InvalidRequestBody;
  decision: undefined;
}

export interface RateLimitErrorBody {
  error: 'rate_limit_exceeded' | 'rate_limiter_unavailable';
  message: string;
  /** The policy that was asked. */
  policy: string;
  retry_after_ms: number;
  /** The limit of the policy that rejected ('' when the limiter was unavailable). */
  limit: string;
}

/** A 429 body of the application's own (an object `message` gave). */
export type DenialBody = Readonly<Record<string, unknown>>;

/**
 * The 429 body: a string replaces the `message` field of the default JSON
 * body (the other fields stay); an object is the whole JSON body; a function
 * of the decision and the request returns either.
 */
export type DenialMessage<Req> = string | DenialBody | ((decision: QuotaDecision, request: Req) => string | DenialBody | Promise<string | DenialBody>);

export interface RateLimitCheckOptions<Req> {
  /**
   * The quota client (createQuotaClient), or anything with its allow().
   * skipFailedRequests and skipSuccessfulRequests also need its reserve().
   */
  client: QuotaDecider & Partial<QuotaReserver>;
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
  /** True: the request passes without asking the quota service at all (no headers either). */
  skip?: (request: Req) => boolean | Promise<boolean>;
  /** The 429 body (see DenialMessage). The 503 and 400 bodies stay as they are. */
  message?: DenialMessage<Req>;
  /** Give the request's units back when its response has a status >= 400 or is never completed. */
  skipFailedRequests?: boolean;
  /** Give the request's units back when its response has a status < 400. */
  skipSuccessfulRequests?: boolean;
  /** Also send X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset; default false. */
  legacyHeaders?: boolean;
  /** Called with each refund's settlement, or the error that stopped it (skipFailedRequests, skipSuccessfulRequests). */
  onRefund?: (result: RefundResult, request: Req) => void;
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
  const refunds = options.skipFailedRequests === true || options.skipSuccessfulRequests === true;
  const { client } = options;
  if (refunds && typeof client.reserve !== 'function') {
    throw new TypeError('skipFailedRequests and skipSuccessfulRequests need a client with reserve(), such as the quota client');
  }
  return async (request) => {
    if (options.skip !== undefined && (await options.skip(request))) return { action: 'continue', headers: {}, decision: undefined };
    const identity = options.identify(request);
    if (identity === undefined) return { action: 'continue', headers: {}, decision: undefined };
    const policy = typeof options.policy === 'string' ? options.policy : options.policy(request);
    const cost = options.cost?.(request);
    const requestId = options.requestId?.(request);
    let decision: QuotaDecision;
    let reservation: QuotaReservation | undefined;
    try {
      if (refunds) {
        // A reservation of the cost: an Allow with a request_id, so Settle can give it back.
        reservation = await client.reserve!({ policy, identity, estimate: cost ?? 1, ...(requestId === undefined ? {} : { requestId }) });
        decision = reservation.decision;
      } else {
        const params: AllowParams = { policy, identity };
        if (cost !== undefined) params.cost = cost;
        if (requestId !== undefined) params.requestId = requestId;
        decision = await client.allow(params);
      }
    } catch (error) {
      const body = invalidInputBody(error);
      if (body === undefined) throw error;
      return { action: 'respond', status: 400, headers: {}, body, decision: undefined };
    }
    const outcome = toOutcome(policy, decision);
    if (options.legacyHeaders === true) Object.assign(outcome.headers, legacyRateLimitHeaders(decision));
    if (outcome.action === 'continue') {
      // Only a unit the service counted can be given back.
      if (reservation !== undefined && decision.source === 'store') outcome.reservation = reservation;
    } else if (outcome.status === 429 && options.message !== undefined) {
      outcome.body = await denialBody(options.message, outcome.body as RateLimitErrorBody, decision, request);
    }
    return outcome;
  };
}

async function denialBody<Req>(
  message: DenialMessage<Req>,
  standard: RateLimitErrorBody,
  decision: QuotaDecision,
  request: Req,
): Promise<RateLimitErrorBody | DenialBody> {
  const made = typeof message === 'function' ? await message(decision, request) : message;
  return typeof made === 'string' ? { ...standard, message: made } : made;
}

export function toOutcome(policy: string, decision: QuotaDecision): RateLimitPass | RateLimitDenial {
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
