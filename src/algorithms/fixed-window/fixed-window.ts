import { readLua, type Algorithm } from '../algorithm.js';
import { decideFixedWindow, fixedWindowKey, type FixedWindowParams } from './model.js';

/** Fixed window counter (spec 3.1): N units per calendar window; allows a burst across a boundary. */
export const fixedWindow: Algorithm<FixedWindowParams> = {
  name: 'fixed_window',
  lua: readLua(import.meta.url, './fixed-window.lua'),

  scriptKeys: (identityKey, params) => [`${identityKey}:${params.window}`],

  scriptArgs: (params, cost) => [String(params.limit), params.window, String(cost)],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const key = fixedWindowKey(`${identityKey}:${params.window}`, params.window, nowMs);
    const count = space.get<number>(key, nowMs) ?? 0;
    const step = decideFixedWindow(count, params, cost, nowMs);
    if (!step.outcome.allowed || cost === 0) return { outcome: step.outcome };
    // Like the script: a new counter gets its expiry as it is created; INCRBY keeps an existing one's.
    return { outcome: step.outcome, commit: () => (count === 0 ? space.set(key, step.count, step.ttlMs, nowMs) : space.update(key, step.count)) };
  },

  refundInMemory(space, identityKey, params, cost, nowMs, spentAtMs) {
    const key = fixedWindowKey(`${identityKey}:${params.window}`, params.window, spentAtMs);
    const count = space.get<number>(key, nowMs) ?? 0;
    if (count > 0) space.update(key, count - Math.min(count, cost));
  },

  capacity: (params) => params.limit,

  // A window counts whole units: round down so N instances never exceed the global limit.
  scaleParams: (params, share) => ({ limit: Math.floor(params.limit * share), window: params.window }),

  rejectCost(params, cost) {
    if (!Number.isInteger(cost)) return `must be a whole number for a fixed window, got ${cost}`;
    if (cost > params.limit) return `${cost} exceeds the window's limit of ${params.limit}, so it could never be granted`;
    return undefined;
  },
};
