import { Redis } from 'ioredis';
import type { LimitOutcome } from '../algorithms/algorithm.js';
import { decideArguments, decideLua, DECIDE_SCRIPT_NAME, parseDecideReply, type DecideMode, type LimitCall } from '../algorithms/decide-script.js';
import type { Clock } from '../clock.js';
import type { Limit } from '../config/policies.js';
import { StoreUnavailableError } from '../engine/errors.js';
import type { QuotaStore } from './store.js';

export interface RedisStoreOptions {
  /**
   * Tests only: send this clock's time to the scripts instead of letting them
   * read Redis TIME. Production leaves it unset; the config cannot set it.
   */
  testClock?: Clock;
}

/** Redis errors that mean "not now" rather than "this script is wrong". */
const TRANSIENT_REPLY = /^(LOADING|BUSY|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK)\b/;

type ScriptRunner = (...args: (string | number)[]) => Promise<unknown>;

/** Decisions inside Redis: one Lua script per decision, EVALSHA with EVAL fallback (ioredis defineCommand). */
export class RedisStore implements QuotaStore {
  readonly description: string;

  constructor(
    private readonly redis: Redis,
    private readonly options: RedisStoreOptions = {},
  ) {
    this.description = `redis ${redis.options.host}:${redis.options.port}`;
    // No numberOfKeys: the key count varies with the limits, so each call passes it first.
    redis.defineCommand(DECIDE_SCRIPT_NAME, { lua: decideLua });
  }

  /** A client tuned for a decision path: fail fast instead of queueing while Redis is away. */
  static connect(url: string, options: RedisStoreOptions = {}): RedisStore {
    const redis = new Redis(url, {
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      maxRetriesPerRequest: 1,
      commandTimeout: 1_000,
      lazyConnect: false,
    });
    // ioredis reconnects by itself; without a listener an 'error' event would crash the process.
    redis.on('error', () => {});
    return new RedisStore(redis, options);
  }

  async decide(limit: Limit, identityKey: string, cost: number): Promise<LimitOutcome> {
    const [outcome] = await this.decideAll([{ limit, identityKey, cost }], 'spend');
    return outcome as LimitOutcome;
  }

  async decideAll(calls: readonly LimitCall[], mode: DecideMode): Promise<LimitOutcome[]> {
    const { keys, args } = decideArguments(calls, mode, this.options.testClock?.now());
    const run = (this.redis as unknown as Record<string, ScriptRunner>)[DECIDE_SCRIPT_NAME];
    if (run === undefined) throw new Error(`script ${DECIDE_SCRIPT_NAME} is not registered`);
    let reply: unknown;
    try {
      reply = await run.call(this.redis, keys.length, ...keys, ...args);
    } catch (error) {
      if (isScriptError(error)) throw error;
      throw new StoreUnavailableError(error);
    }
    return parseDecideReply(reply, calls.length);
  }

  /** Keys in the quota database (DBSIZE, O(1)); for the state-keys metric. */
  async keyCount(): Promise<number> {
    return this.redis.dbsize();
  }

  /** Waits until Redis answers a PING; ioredis keeps reconnecting meanwhile. */
  async ready(): Promise<void> {
    for (;;) {
      try {
        if (this.redis.status === 'ready' && (await this.redis.ping()) === 'PONG') return;
      } catch {
        // Not yet: wait for the next connection attempt.
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** A reply error from the script itself is a bug to surface, not an outage. */
function isScriptError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError' && !TRANSIENT_REPLY.test(error.message);
}
