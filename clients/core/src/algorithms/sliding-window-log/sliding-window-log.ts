import type { Algorithm } from '../algorithm.js';
import { windowMs } from '../fixed-window/model.js';
import { chargeSlidingWindowLog, decideSlidingWindowLog, refundSlidingWindowLog, type SlidingWindowLogParams } from './model.js';

/** Sliding window log: an exact rolling window, one stored entry per unit accepted. */
export const slidingWindowLog: Algorithm<SlidingWindowLogParams> = {
  name: 'sliding_window_log',

  scriptKeys: (identityKey) => [identityKey],

  scriptArgs: (params, cost) => [String(params.limit), String(windowMs(params.window)), String(cost)],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const step = decideSlidingWindowLog(space.get<number[]>(identityKey, nowMs), params, cost, nowMs);
    const write = step.write;
    if (write === undefined) return { outcome: step.outcome };
    return { outcome: step.outcome, commit: () => space.set(identityKey, write.log, write.ttlMs, nowMs) };
  },

  refundInMemory(space, identityKey, _params, cost, nowMs, spentAtMs) {
    const log = space.get<number[]>(identityKey, nowMs);
    if (log === undefined) return;
    const next = refundSlidingWindowLog(log, cost, spentAtMs);
    // Like ZREM: the set keeps its expiry, and Redis deletes it once empty.
    if (next === undefined) space.delete(identityKey);
    else space.update(identityKey, next);
  },

  chargeInMemory(space, identityKey, params, cost, nowMs) {
    const write = chargeSlidingWindowLog(space.get<number[]>(identityKey, nowMs), params, cost, nowMs);
    if (write !== undefined) space.set(identityKey, write.log, write.ttlMs, nowMs);
  },

  capacity: (params) => params.limit,

  // Whole units: round down so N instances never exceed the global limit.
  scaleParams: (params, share) => ({ limit: Math.floor(params.limit * share), window: params.window }),

  rejectCost(params, cost) {
    if (!Number.isInteger(cost)) return `must be a whole number for a sliding window log, got ${cost}`;
    if (cost > params.limit) return `${cost} exceeds the window's limit of ${params.limit}, so it could never be granted`;
    return undefined;
  },
};
