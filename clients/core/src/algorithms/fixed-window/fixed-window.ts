import type { Algorithm } from '../algorithm.js';
import { decideFixedWindow, fixedWindowCount, fixedWindowKey, windowMs, type FixedWindowParams, type FixedWindowState } from './model.js';

/** Fixed window counter: N units per calendar window; allows a burst across a boundary. */
export const fixedWindow: Algorithm<FixedWindowParams> = {
  name: 'fixed_window',

  scriptKeys: (identityKey, params) => [fixedWindowKey(identityKey, params.window)],

  scriptArgs: (params, cost) => [String(params.limit), String(params.window), String(cost)],

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const key = fixedWindowKey(identityKey, params.window);
    const count = fixedWindowCount(space.get<FixedWindowState>(key, nowMs), params.window, nowMs);
    const step = decideFixedWindow(count, params, cost, nowMs);
    if (!step.outcome.allowed || cost === 0) return { outcome: step.outcome };
    const start = nowMs - (nowMs % windowMs(params.window));
    // Like the script: a new window's counter replaces the old one with its expiry; HINCRBY keeps the expiry.
    return {
      outcome: step.outcome,
      commit: () => (count === 0 ? space.set(key, { start, count: step.count }, step.ttlMs, nowMs) : space.update(key, { start, count: step.count })),
    };
  },

  refundInMemory(space, identityKey, params, cost, nowMs, spentAtMs) {
    const key = fixedWindowKey(identityKey, params.window);
    const state = space.get<FixedWindowState>(key, nowMs);
    if (state === undefined || state.start !== spentAtMs - (spentAtMs % windowMs(params.window))) return;
    space.update(key, { start: state.start, count: state.count - Math.min(state.count, cost) });
  },

  chargeInMemory(space, identityKey, params, cost, nowMs) {
    if (cost <= 0) return;
    const key = fixedWindowKey(identityKey, params.window);
    const count = fixedWindowCount(space.get<FixedWindowState>(key, nowMs), params.window, nowMs);
    // Past the limit, but never twice it.
    const add = Math.min(cost, Math.max(0, 2 * params.limit - count));
    if (add <= 0) return;
    const ms = windowMs(params.window);
    const start = nowMs - (nowMs % ms);
    // Like the script: a new window's counter replaces the old one with its expiry; HINCRBY keeps the expiry.
    if (count === 0) space.set(key, { start, count: add }, start + ms - nowMs, nowMs);
    else space.update(key, { start, count: count + add });
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
