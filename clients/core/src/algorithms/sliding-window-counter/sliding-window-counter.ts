import type { Algorithm } from '../algorithm.js';
import { windowMs } from '../fixed-window/model.js';
import {
  chargeSlidingWindowCounter,
  decideSlidingWindowCounter,
  refundSlidingWindowCounter,
  type SlidingWindowCounterParams,
  type SlidingWindowCounterState,
} from './model.js';

/** Sliding window counter: two counters, an estimate of the rolling window. */
export const slidingWindowCounter: Algorithm<SlidingWindowCounterParams> = {
  name: 'sliding_window_counter',

  scriptKeys: (identityKey) => [identityKey],

  scriptArgs: (params, cost) => [String(params.limit), String(windowMs(params.window)), String(cost)],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const step = decideSlidingWindowCounter(space.get<SlidingWindowCounterState>(identityKey, nowMs), params, cost, nowMs);
    const write = step.write;
    if (write === undefined) return { outcome: step.outcome };
    return { outcome: step.outcome, commit: () => space.set(identityKey, write.state, write.ttlMs, nowMs) };
  },

  refundInMemory(space, identityKey, params, cost, nowMs, spentAtMs) {
    const state = space.get<SlidingWindowCounterState>(identityKey, nowMs);
    const next = state === undefined ? undefined : refundSlidingWindowCounter(state, params, cost, spentAtMs);
    // HSET keeps the hash's expiry.
    if (next !== undefined) space.update(identityKey, next);
  },

  chargeInMemory(space, identityKey, params, cost, nowMs) {
    const write = chargeSlidingWindowCounter(space.get<SlidingWindowCounterState>(identityKey, nowMs), params, cost, nowMs);
    if (write !== undefined) space.set(identityKey, write.state, write.ttlMs, nowMs);
  },

  capacity: (params) => params.limit,

  // Whole units: round down so N instances never exceed the global limit.
  scaleParams: (params, share) => ({ limit: Math.floor(params.limit * share), window: params.window }),

  rejectCost(params, cost) {
    if (!Number.isInteger(cost)) return `must be a whole number for a sliding window counter, got ${cost}`;
    if (cost > params.limit) return `${cost} exceeds the window's limit of ${params.limit}, so it could never be granted`;
    return undefined;
  },
};
