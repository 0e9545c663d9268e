import type { Algorithm } from '../algorithm.js';
import { chargeLeakyBucket, decideLeakyBucket, refundLeakyBucket, type LeakyBucketParams, type LeakyBucketState } from './model.js';

/** Leaky bucket: a steady outflow; policing rejects over the rate, shaping delays within a bounded queue. */
export const leakyBucket: Algorithm<LeakyBucketParams> = {
  name: 'leaky_bucket',

  scriptKeys: (identityKey) => [identityKey],

  scriptArgs: (params, cost) => [String(params.capacity), String(params.leakPerSecond), String(cost), params.mode],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const step = decideLeakyBucket(space.get<LeakyBucketState>(identityKey, nowMs), params, cost, nowMs);
    const write = step.write;
    if (write === undefined) return { outcome: step.outcome };
    return { outcome: step.outcome, commit: () => space.set(identityKey, write.state, write.ttlMs, nowMs) };
  },

  refundInMemory(space, identityKey, params, cost, nowMs) {
    const write = refundLeakyBucket(space.get<LeakyBucketState>(identityKey, nowMs), params, cost, nowMs);
    if (write === 'delete') space.delete(identityKey);
    else if (write !== undefined) space.set(identityKey, write.state, write.ttlMs, nowMs);
  },

  chargeInMemory(space, identityKey, params, cost, nowMs) {
    const write = chargeLeakyBucket(space.get<LeakyBucketState>(identityKey, nowMs), params, cost, nowMs);
    if (write !== undefined) space.set(identityKey, write.state, write.ttlMs, nowMs);
  },

  capacity: (params) => params.capacity,

  // The queue and the leak rate shrink, so N instances together serve about the global pace.
  scaleParams: (params, share) => ({ ...params, capacity: params.capacity * share, leakPerSecond: params.leakPerSecond * share }),

  rejectCost: (params, cost) =>
    cost > params.capacity ? `${cost} exceeds the bucket's capacity of ${params.capacity}, so it could never be granted` : undefined,
};
