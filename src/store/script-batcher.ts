import { batchArguments, splitBatchReply } from '../algorithms/decide-batch.js';
import type { ScriptCall } from '../algorithms/decide-script.js';

/**
 * Sends one driver call to Redis and answers its reply, or rejects with the
 * error the caller should see (RedisStore maps a transient one to
 * StoreUnavailableError, keeps a script error as it is).
 */
export type ScriptSender = (call: ScriptCall) => Promise<unknown>;

/**
 * How many calls and keys one batched script call may carry: Redis serves
 * nothing else while a script runs, so a script stays short (about 100 token
 * bucket decisions run in well under a millisecond; docs/decide-script.md).
 */
export const BATCH_LIMITS = { calls: 100, keys: 256 };

interface Waiting {
  call: ScriptCall;
  resolve: (reply: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Coalesces the driver calls issued within one event-loop turn into one
 * script call in batch mode (decide.lua): the calls queue up and are flushed
 * on setImmediate, after the turn's microtasks (so the engine's 100 allow
 * calls of one AllowBatch, each a few awaits deep, are all queued) and
 * before any timer, so no call waits past the current turn. A lone call goes
 * as an ordinary driver call.
 *
 * Each call keeps its own outcome: the batch reply holds one reply per call,
 * an error in one call's Lua (e.g. WRONGTYPE) rejects only that call with a
 * script error, and an error of the whole script call (connection, LOADING,
 * BUSY, timeout) rejects every call in it, as it would have each separate call.
 */
export class ScriptBatcher {
  private queue: Waiting[] = [];
  private scheduled = false;

  constructor(
    private readonly send: ScriptSender,
    /** Maps an error reply of one call inside a batch to what its caller sees. */
    private readonly callError: (error: Error) => unknown,
    private readonly limits = BATCH_LIMITS,
  ) {}

  run(call: ScriptCall): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ call, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    let start = 0;
    let keys = 0;
    for (let i = 0; i < queue.length; i++) {
      const size = (queue[i] as Waiting).call.keys.length;
      if (i > start && (i - start === this.limits.calls || keys + size > this.limits.keys)) {
        this.dispatch(queue.slice(start, i));
        start = i;
        keys = 0;
      }
      keys += size;
    }
    if (start < queue.length) this.dispatch(queue.slice(start));
  };

  private dispatch(waiting: Waiting[]): void {
    if (waiting.length === 1) {
      const [only] = waiting as [Waiting];
      this.send(only.call).then(only.resolve, only.reject);
      return;
    }
    const batch = batchArguments(waiting.map((w) => w.call));
    this.send(batch).then(
      (reply) => {
        const replies = splitBatchReply(reply, batch);
        if (replies instanceof Error) {
          for (const w of waiting) w.reject(replies);
          return;
        }
        waiting.forEach((w, i) => {
          const one = replies[i];
          if (one instanceof Error) w.reject(this.callError(one));
          else w.resolve(one);
        });
      },
      (error: unknown) => {
        for (const w of waiting) w.reject(error);
      },
    );
  }
}
