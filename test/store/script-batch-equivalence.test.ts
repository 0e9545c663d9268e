import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  type DecideMode,
  encodeRemembered,
  type GroupDecision,
  identityKey,
  type Limit,
  type LimitCall,
  type Memo,
  parsePolicies,
  requestKey,
} from '@quota-service/core';
import { redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { scriptCalls } from '../support/script-calls.js';
import { useRedisServer } from '../support/use-redis.js';
import { decideAll, decideGroup } from '../support/store-calls.js';

/**
 * The coalescing RedisStore (driver batch mode, src/store/redis/script-batcher.ts)
 * decides calls issued together exactly as the same calls issued one by one:
 * same outcomes in the same order, same errors, and the same end state (DUMP
 * of every key, TTLs within a tolerance) on a second Redis.
 *
 * Virtual time moves in whole seconds with slow rates, so every TTL a script
 * sets is a second or more of real time and no key lapses on Redis's own clock
 * between the two runs of a step.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      bucket: { limits: [{ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 4, refill_per_second: 1 }] },
      window: { limits: [{ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' }] },
      log: { limits: [{ name: 'log', key_by: 'user', algorithm: 'sliding_window_log', limit: 3, window: 'second' }] },
      counter: { limits: [{ name: 'counter', key_by: 'user', algorithm: 'sliding_window_counter', limit: 3, window: 'second' }] },
      leaky: { limits: [{ name: 'leaky', key_by: 'user', algorithm: 'leaky_bucket', capacity: 3, leak_per_second: 1 }] },
      shape: { limits: [{ name: 'shape', key_by: 'user', algorithm: 'leaky_bucket', capacity: 3, leak_per_second: 1, mode: 'shaping' }] },
      gcra: { limits: [{ name: 'gcra', key_by: 'user', algorithm: 'gcra', capacity: 3, refill_per_second: 1 }] },
      // Two limits in one call: all or nothing inside one item of a batch.
      pair: {
        limits: [
          { name: 'pair-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 1 },
          { name: 'pair-window', key_by: 'user', algorithm: 'fixed_window', limit: 2, window: 'minute' },
        ],
      },
    },
  }),
);
const policyNames = [...policies.keys()];

type Op =
  | { kind: 'decide'; policy: string; who: string; cost: number; mode: DecideMode; spentAgoMs: number; requestId: string; claim: boolean }
  | { kind: 'forget'; policy: string; who: string; requestId: string }
  | { kind: 'remember'; policy: string; who: string; requestId: string };

const who = fc.constantFrom('a', 'b', 'c');
const requestId = fc.constantFrom('', '', 'r1', 'r2');
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('decide' as const),
      policy: fc.constantFrom(...policyNames),
      who,
      cost: fc.integer({ min: 0, max: 3 }),
      mode: fc.constantFrom<DecideMode>('spend', 'spend', 'spend', 'peek', 'check', 'refund'),
      spentAgoMs: fc.constantFrom(0, 1_000),
      requestId,
      claim: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('forget' as const), policy: fc.constantFrom(...policyNames), who, requestId: fc.constantFrom('r1', 'r2') }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('remember' as const), policy: fc.constantFrom(...policyNames), who, requestId: fc.constantFrom('r1', 'r2') }),
  },
);
/** A step: virtual time moves on, then its calls are issued together. */
const steps = fc.array(fc.record({ advanceMs: fc.constantFrom(0, 1_000, 2_000, 5_000), ops: fc.array(op, { minLength: 1, maxLength: 30 }) }), {
  minLength: 1,
  maxLength: 6,
});

function callsOf(policy: string, user: string, cost: number): LimitCall[] {
  const limits = policies.get(policy)?.limits ?? [];
  return limits.map((limit: Limit) => ({ limit, identityKey: identityKey(limit.name, limit.keyBy, user), cost }));
}

function memoOf(policy: string, user: string, id: string, count: number, claim = false): Memo {
  const first = policies.get(policy)?.limits[0] as Limit;
  return { key: requestKey(policy, first.keyBy, user, `${first.keyBy}=${user}`, id), ttlMs: 60_000, count, ...(claim ? { claim } : {}) };
}

/** What one op answered: its decision, or its error's class and message (the same on both paths). */
async function issue(store: StoreFixture['store'], o: Op, now: number): Promise<unknown> {
  try {
    if (o.kind === 'forget') return await store.remember(memoOf(o.policy, o.who, o.requestId, 0), '');
    if (o.kind === 'remember') {
      const count = callsOf(o.policy, o.who, 0).length;
      const decision: GroupDecision = {
        outcomes: Array.from({ length: count }, () => ({ allowed: true, retryAfterMs: 0, remaining: 1, resetAfterMs: 5 })),
        nowMs: now - 1,
      };
      return await store.remember(
        memoOf(o.policy, o.who, o.requestId, count),
        encodeRemembered(decision, { estimate: 1, spentAtMs: Array.from({ length: count }, () => now - 1) }),
      );
    }
    const calls = callsOf(o.policy, o.who, o.cost);
    const options = {
      ...(o.mode === 'refund' ? { spentAtMs: now - o.spentAgoMs } : {}),
      ...(o.mode === 'spend' && o.requestId !== '' ? { memo: memoOf(o.policy, o.who, o.requestId, calls.length, o.claim) } : {}),
    };
    return await decideGroup(store, calls, o.mode, options);
  } catch (error) {
    return { error: (error as Error).constructor.name, message: (error as Error).message };
  }
}

/** Every key's DUMP and TTL; TTLs rounded away by the tolerance at the caller. */
async function state(redis: Redis): Promise<{ key: string; dump: string; ttl: number }[]> {
  const keys = (await redis.keys('*')).sort();
  return Promise.all(keys.map(async (key) => ({ key, dump: ((await redis.dumpBuffer(key)) as Buffer).toString('hex'), ttl: await redis.pttl(key) })));
}

const together = useRedisServer();
const oneByOne = useRedisServer();

describe('driver batch mode: calls issued together = the same calls one by one', () => {
  let batched: StoreFixture;
  let single: StoreFixture;
  let batchedRedis: Redis;
  let singleRedis: Redis;
  beforeAll(async () => {
    batched = redisFixture(together());
    single = redisFixture(oneByOne());
    batchedRedis = together().client();
    singleRedis = oneByOne().client();
    // Load the script on both (ioredis's first EVALSHA meets NOSCRIPT), so the call counts below are exact.
    await Promise.all([decideAll(batched.store, callsOf('bucket', 'warm', 0), 'peek'), decideAll(single.store, callsOf('bucket', 'warm', 0), 'peek')]);
  });
  afterAll(async () => {
    await Promise.all([batched.store.close(), single.store.close()]);
    batchedRedis.disconnect();
    singleRedis.disconnect();
  });

  it('same outcomes in the same order, same errors, same end state (DUMP of every key, TTLs within 500 ms)', async () => {
    await fc.assert(
      fc.asyncProperty(steps, async (run) => {
        await Promise.all([batched.reset(), single.reset()]);
        await Promise.all([batchedRedis.config('RESETSTAT'), singleRedis.config('RESETSTAT')]);
        let now = T0;
        let issued = 0;
        for (const [i, { advanceMs, ops }] of run.entries()) {
          now += advanceMs;
          batched.clock.set(now);
          single.clock.set(now);
          // All in one turn: the coalescing store sends them as batches.
          const together = await Promise.all(ops.map((o) => issue(batched.store, o, now)));
          const apart: unknown[] = [];
          for (const o of ops) apart.push(await issue(single.store, o, now));
          expect(together, `step ${i} at +${now - T0} ms`).toEqual(apart);
          issued += ops.length;
        }
        const [a, b] = await Promise.all([state(batchedRedis), state(singleRedis)]);
        expect(a.map(({ key, dump }) => ({ key, dump }))).toEqual(b.map(({ key, dump }) => ({ key, dump })));
        a.forEach(({ key, ttl }, i) => expect(Math.abs(ttl - (b[i]?.ttl ?? Number.NaN)), `TTL of ${key}`).toBeLessThanOrEqual(500));
        // The one-by-one side made one script call per op; the batched side one per step (or one op alone).
        expect(await scriptCalls(singleRedis)).toBe(issued);
        expect(await scriptCalls(batchedRedis)).toBe(run.length);
      }),
      { numRuns: 40 },
    );
  });
});
