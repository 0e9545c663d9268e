import { readLua, replyArray, replyInteger, type Algorithm } from '../algorithm.js';
import { decideTokenBucket, type TokenBucketParams, type TokenBucketState } from './model.js';

const SCRIPT = 'quotaTokenBucket';

/** Token bucket (spec 3.2): bursts up to capacity, refills at a steady rate. */
export const tokenBucket: Algorithm<TokenBucketParams> = {
  name: 'token_bucket',
  scriptName: SCRIPT,
  lua: readLua(import.meta.url, './token-bucket.lua'),

  scriptKeys: (identityKey) => [identityKey],

  scriptArgs: (params, cost) => [String(params.capacity), String(params.refillPerSecond), String(cost)],

  parseReply(reply) {
    const parts = replyArray(reply, 4, SCRIPT);
    const tokens = Number(parts[2]);
    if (typeof parts[2] !== 'string' || Number.isNaN(tokens)) {
      throw new Error(`${SCRIPT}: reply[2] is not a number string: ${String(parts[2])}`);
    }
    return {
      allowed: replyInteger(parts, 0, SCRIPT) === 1,
      retryAfterMs: replyInteger(parts, 1, SCRIPT),
      remaining: tokens,
      resetAfterMs: replyInteger(parts, 3, SCRIPT),
    };
  },

  decideInMemory(space, identityKey, params, cost, nowMs) {
    const step = decideTokenBucket(space.get<TokenBucketState>(identityKey, nowMs), params, cost, nowMs);
    space.set(identityKey, step.state, step.ttlMs, nowMs);
    return step.outcome;
  },

  capacity: (params) => params.capacity,

  // Both the burst and the pace shrink, so N instances together grant about the global limit.
  scaleParams: (params, share) => ({ capacity: params.capacity * share, refillPerSecond: params.refillPerSecond * share }),

  rejectCost: (params, cost) =>
    cost > params.capacity ? `${cost} exceeds the bucket's capacity of ${params.capacity}, so it could never be granted` : undefined,
};
