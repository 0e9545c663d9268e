import type { LimitOutcome } from '../outcome.js';

export interface TokenBucketParams {
  /** Maximum tokens: the largest burst. */
  capacity: number;
  /** Tokens added per second: the long-run pace. */
  refillPerSecond: number;
}

export interface TokenBucketState {
  tokens: number;
  /** Unix ms of the last update. */
  ts: number;
}

export interface TokenBucketStep {
  outcome: LimitOutcome;
  state: TokenBucketState;
  ttlMs: number;
}

/** How long an untouched bucket lives: twice the time to refill from empty. */
export function tokenBucketTtlMs(params: TokenBucketParams): number {
  return Math.ceil((params.capacity * 2000) / params.refillPerSecond);
}

/**
 * The token bucket decision as a pure function; the Lua script is
 * the same computation in the same order of floating-point operations, so the
 * two agree to the last bit.
 */
export function decideTokenBucket(state: TokenBucketState | undefined, params: TokenBucketParams, cost: number, nowMs: number): TokenBucketStep {
  const { capacity, refillPerSecond: rate } = params;
  const prior = state ?? { tokens: capacity, ts: nowMs };
  const elapsed = Math.max(0, nowMs - prior.ts);
  let tokens = Math.min(capacity, prior.tokens + (elapsed * rate) / 1000);

  let allowed = false;
  let retryAfterMs = 0;
  if (tokens >= cost) {
    allowed = true;
    tokens = tokens - cost;
  } else {
    retryAfterMs = Math.ceil(((cost - tokens) * 1000) / rate);
  }

  return {
    outcome: { allowed, retryAfterMs, remaining: tokens, resetAfterMs: Math.ceil(((capacity - tokens) * 1000) / rate) },
    state: { tokens, ts: nowMs },
    ttlMs: tokenBucketTtlMs(params),
  };
}

/**
 * Spends `cost` tokens without checking: refill to now, take cost, but never
 * below -capacity (a debt of at most one bucket, which the key's expiry still
 * covers). undefined (nothing to write) for a cost of 0.
 */
export function chargeTokenBucket(state: TokenBucketState | undefined, params: TokenBucketParams, cost: number, nowMs: number): TokenBucketState | undefined {
  if (cost <= 0) return undefined;
  const { capacity, refillPerSecond: rate } = params;
  const prior = state ?? { tokens: capacity, ts: nowMs };
  let tokens = Math.min(capacity, prior.tokens + (Math.max(0, nowMs - prior.ts) * rate) / 1000);
  tokens = Math.min(tokens, Math.max(-capacity, tokens - cost));
  return { tokens, ts: nowMs };
}

/**
 * Gives back `cost` tokens a spend took: refill to now, add cost, cap at the
 * capacity. undefined (nothing to write) when there is no bucket: it is full.
 */
export function refundTokenBucket(state: TokenBucketState | undefined, params: TokenBucketParams, cost: number, nowMs: number): TokenBucketState | undefined {
  if (state === undefined) return undefined;
  const { capacity, refillPerSecond: rate } = params;
  let tokens = Math.min(capacity, state.tokens + (Math.max(0, nowMs - state.ts) * rate) / 1000);
  tokens = Math.min(capacity, tokens + cost);
  return { tokens, ts: nowMs };
}
