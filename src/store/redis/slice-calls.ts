import type { Clock, GroupDecision } from '@quota-service/core';
import type { SliceStep } from '../store.js';
import type { RedisClient } from './redis-store.js';
import { parseSliceReply, SLICE_SCRIPT_NAME, sliceArguments, sliceLua } from './script/slice-script.js';
import { storeError } from './store-errors.js';

type ScriptRunner = (...args: (string | number)[]) => Promise<unknown>;

/**
 * Slice steps on Redis: one call of the slice script each (script/slice-script.ts),
 * outside the decision batches: a holder takes or gives back a slice about
 * once per slice's life. On a cluster ioredis routes the call by its keys'
 * slot (the identity's hash tag), following MOVED and ASK.
 */
export class SliceCalls {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock?: Clock,
  ) {
    redis.defineCommand(SLICE_SCRIPT_NAME, { lua: sliceLua });
  }

  async run(step: SliceStep): Promise<GroupDecision> {
    const { keys, args } = sliceArguments(step.calls[0], step.holder, step.op, step.giveBack, this.clock?.now());
    const run = (this.redis as unknown as Record<string, ScriptRunner>)[SLICE_SCRIPT_NAME]!;
    let reply: unknown;
    try {
      reply = await run.call(this.redis, keys.length, ...keys, ...args);
    } catch (error) {
      throw storeError(error);
    }
    const slice = parseSliceReply(reply);
    return { outcomes: [], nowMs: slice.nowMs, slice };
  }
}
