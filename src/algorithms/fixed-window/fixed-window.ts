import { readLua, replyArray, replyInteger, type Algorithm } from '../algorithm.js';
import { decideFixedWindow, type FixedWindowParams } from './model.js';

const SCRIPT = 'quotaFixedWindow';

/** Fixed window counter (spec 3.1): N units per calendar window; allows a burst across a boundary. */
export const fixedWindow: Algorithm<FixedWindowParams> = {
  name: 'fixed_window',
  scriptName: SCRIPT,
  lua: readLua(import.meta.url, './fixed-window.lua'),

  scriptKeys: (identityKey, params) => [`${identityKey}:${params.window}`],

  scriptArgs: (params, cost) => [String(params.limit), params.window, String(cost)],

  parseReply(reply, params) {
    const parts = replyArray(reply, 4, SCRIPT);
    const allowed = replyInteger(parts, 0, SCRIPT) === 1;
    return {
      allowed,
      retryAfterMs: replyInteger(parts, 1, SCRIPT),
      remaining: params.limit - replyInteger(parts, 2, SCRIPT),
      resetAfterMs: replyInteger(parts, 3, SCRIPT),
    };
  },

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const [keyPrefix] = this.scriptKeys(identityKey, params) as [string];
    const step = decideFixedWindow(keyPrefix, (key) => space.get<number>(key, nowMs) ?? 0, params, cost, nowMs);
    if (step.outcome.allowed) {
      // Like the script: a new counter gets its expiry as it is created; INCRBY keeps an existing one's.
      if (step.count === cost) space.set(step.key, step.count, step.ttlMs, nowMs);
      else space.update(step.key, step.count);
    }
    return step.outcome;
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
