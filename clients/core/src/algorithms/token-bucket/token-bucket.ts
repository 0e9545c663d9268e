import type { Algorithm } from '../algorithm.js';
import { chargeTokenBucket, decideTokenBucket, refundTokenBucket, tokenBucketTtlMs, type TokenBucketParams, type TokenBucketState } from './model.js';

/** Token bucket: bursts up to capacity, refills at a steady rate. */
export const tokenBucket: Algorithm<TokenBucketParams> = {
  name: 'token_bucket',

  scriptKeys: (identityKey) => [identityKey],

  scriptArgs: (params, cost) => [String(params.capacity), String(params.refillPerSecond), String(cost)],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const step = decideTokenBucket(space.get<TokenBucketState>(identityKey, nowMs), params, cost, nowMs);
    return { outcome: step.outcome, commit: () => space.set(identityKey, step.state, step.ttlMs, nowMs) };
  },

  refundInMemory(space, identityKey, params, cost, nowMs) {
    const state = refundTokenBucket(space.get<TokenBucketState>(identityKey, nowMs), params, cost, nowMs);
    if (state !== undefined) space.set(identityKey, state, tokenBucketTtlMs(params), nowMs);
  },

  chargeInMemory(space, identityKey, params, cost, nowMs) {
    const state = chargeTokenBucket(space.get<TokenBucketState>(identityKey, nowMs), params, cost, nowMs);
    if (state !== undefined) space.set(identityKey, state, tokenBucketTtlMs(params), nowMs);
  },

  capacity: (params) => params.capacity,

  // Both the burst and the pace shrink, so N instances together grant about the global limit.
  scaleParams: (params, share) => ({ capacity: params.capacity * share, refillPerSecond: params.refillPerSecond * share }),

  rejectCost: (params, cost) =>
    cost > params.capacity ? `${cost} exceeds the bucket's capacity of ${params.capacity}, so it could never be granted` : undefined,
};
