import type { Algorithm } from '../algorithm.js';
import { chargeGcra, decideGcra, refundGcra, type GcraParams } from './model.js';

/** GCRA: a token bucket's guarantees in one timestamp per identity. */
export const gcra: Algorithm<GcraParams> = {
  name: 'gcra',

  scriptKeys: (identityKey) => [identityKey],

  scriptArgs: (params, cost) => [String(params.capacity), String(params.refillPerSecond), String(cost)],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const step = decideGcra(space.get<number>(identityKey, nowMs), params, cost, nowMs);
    const write = step.write;
    if (write === undefined) return { outcome: step.outcome };
    return { outcome: step.outcome, commit: () => space.set(identityKey, write.tat, write.ttlMs, nowMs) };
  },

  refundInMemory(space, identityKey, params, cost, nowMs) {
    const write = refundGcra(space.get<number>(identityKey, nowMs), params, cost, nowMs);
    if (write === 'delete') space.delete(identityKey);
    else if (write !== undefined) space.set(identityKey, write.tat, write.ttlMs, nowMs);
  },

  chargeInMemory(space, identityKey, params, cost, nowMs) {
    const write = chargeGcra(space.get<number>(identityKey, nowMs), params, cost, nowMs);
    if (write !== undefined) space.set(identityKey, write.tat, write.ttlMs, nowMs);
  },

  capacity: (params) => params.capacity,

  // Both the burst and the pace shrink, as for the token bucket.
  scaleParams: (params, share) => ({ capacity: params.capacity * share, refillPerSecond: params.refillPerSecond * share }),

  rejectCost: (params, cost) => (cost > params.capacity ? `${cost} exceeds the burst capacity of ${params.capacity}, so it could never be granted` : undefined),
};
