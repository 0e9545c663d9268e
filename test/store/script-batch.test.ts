import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { identityKey, parsePolicies, StoreUnavailableError } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { RedisOverrides } from '../../src/overrides/redis-overrides.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { limitFrom, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { scriptCalls } from '../support/script-calls.js';
import { startTestService } from '../support/quota-service.js';
import { useRedisServer } from '../support/use-redis.js';
import { decideAll, decideGroups, decideLimit } from '../support/store-calls.js';

/**
 * The coalescing RedisStore as Redis sees it (INFO commandstats): one script
 * call per event-loop turn, each call in it failing or succeeding on its own,
 * and a script cache emptied between batches is refilled (NOSCRIPT -> EVAL).
 */
const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
const keyOf = (user: string) => identityKey('bucket', 'user', user);
const policies = parsePolicies(
  stringify({ policies: { orders: { limits: [{ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 }] } } }),
);

const server = useRedisServer();

describe('RedisStore coalesces one turn of script calls into one script call', () => {
  let f: StoreFixture;
  let redis: Redis;
  beforeAll(() => {
    f = redisFixture(server());
    redis = server().client();
  });
  beforeEach(async () => {
    await f.reset();
    await decideAll(f.store, [{ limit: bucket, identityKey: keyOf('warm'), cost: 0 }], 'peek');
    await redis.config('RESETSTAT');
  });
  afterAll(async () => {
    await f.store.close();
    redis.disconnect();
  });

  it('the 250 allow calls of one turn through the engine (as one AllowBatch issues them) reach Redis as 3 script calls', async () => {
    const engine = new QuotaEngine(policies, f.store);
    const decisions = await Promise.all(
      Array.from({ length: 250 }, (_, i) => engine.allow({ policy: 'orders', identity: { user: `u${i % 125}` }, cost: 1, requestId: '' })),
    );
    expect(decisions.every((d) => d.allowed && d.source === 'store')).toBe(true);
    // 100 calls per script call at most (BATCH_LIMITS): 100 + 100 + 50.
    expect(await scriptCalls(redis)).toBe(3);
    // Each user was asked twice in order: 10 -> 9 -> 8.
    expect(decisions.map((d) => d.limits[0]?.remaining)).toEqual([...Array(125).fill(9), ...Array(125).fill(8)]);
    expect(await f.tokenBucket(keyOf('u7'))).toEqual({ tokens: 8, ts: T0 });
  });

  it('a script call carries at most 512 keys: 100 calls of 6 limits each go as 85 + 15 calls', async () => {
    const three = ['x', 'y', 'z', 'v', 'w', 'q'].map((name) =>
      limitFrom({ name, key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 }),
    );
    const outcomes = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        decideAll(
          f.store,
          three.map((limit) => ({ limit, identityKey: identityKey(limit.name, 'user', `k${i}`), cost: 1 })),
          'spend',
        ),
      ),
    );
    expect(outcomes.flat().every((o) => o.allowed && o.remaining === 9)).toBe(true);
    expect(await scriptCalls(redis)).toBe(2);
  });

  it("one AllowBatch of 100 requests over gRPC (the quota client's batch) reaches Redis as one script call, the overrides' guard included", async () => {
    // As src/main.ts serves a Redis store: each decision checks this replica's view of the overrides.
    const service = await startTestService(f.store, policies, { overrides: new RedisOverrides(redis) });
    try {
      await redis.config('RESETSTAT');
      const requests = Array.from({ length: 100 }, (_, i) => ({ policy: 'orders', identity: { user: `g${i}` }, cost: 1, requestId: '' }));
      const { results } = await service.client.allowBatch({ requests });
      expect(results.map((r) => r.response?.allowed)).toEqual(Array(100).fill(true));
      expect(await scriptCalls(redis)).toBe(1);
    } finally {
      await service.stop();
    }
  });

  it('an item hitting WRONGTYPE fails alone, with the script-error class a lone call gets; the others are decided and written', async () => {
    await redis.set(keyOf('bad'), 'not a hash');
    const call = (user: string) =>
      decideLimit(f.store, bucket, keyOf(user), 1).then(
        (outcome) => ({ outcome }),
        (error: unknown) => ({ error }),
      );
    const [first, bad, last] = await Promise.all([call('a'), call('bad'), call('b')]);
    expect(await scriptCalls(redis)).toBe(1);
    expect(first).toEqual({ outcome: { allowed: true, retryAfterMs: 0, remaining: 9, resetAfterMs: 1_000 } });
    expect(last).toEqual(first);
    expect(await f.tokenBucket(keyOf('a'))).toEqual({ tokens: 9, ts: T0 });
    expect(await f.tokenBucket(keyOf('b'))).toEqual({ tokens: 9, ts: T0 });

    const alone = await call('bad');
    for (const failed of [bad, alone]) {
      const error = (failed as { error?: Error }).error;
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(StoreUnavailableError);
      expect(error?.name).toBe('ReplyError');
      expect(error?.message).toMatch(/^WRONGTYPE/);
    }
    expect(await redis.get(keyOf('bad'))).toBe('not a hash');
  });

  it('decideGroups (an AllowBatch decided together): one script call, one answer per group, the WRONGTYPE one an Error in its place', async () => {
    await redis.set(keyOf('bad'), 'not a hash');
    const groups = ['a', 'bad', 'b'].map((user) => [{ limit: bucket, identityKey: keyOf(user), cost: 1 }]);
    const [first, bad, last] = await decideGroups(f.store, groups, 'spend');
    expect(await scriptCalls(redis)).toBe(1);
    expect(first).toEqual({ outcomes: [{ allowed: true, retryAfterMs: 0, remaining: 9, resetAfterMs: 1_000 }], nowMs: T0 });
    expect(last).toEqual(first);
    expect(bad).toBeInstanceOf(Error);
    expect(bad).not.toBeInstanceOf(StoreUnavailableError);
    expect((bad as Error).message).toMatch(/^WRONGTYPE/);
    expect(await f.tokenBucket(keyOf('b'))).toEqual({ tokens: 9, ts: T0 });
  });

  it('SCRIPT FLUSH between two batches: the next batch still decides (EVAL after NOSCRIPT, where the store sends scripts)', async () => {
    const scripts = new RedisStore(server().client(), { clock: f.clock, functions: false });
    try {
      await scripts.ready();
      const batch = () => Promise.all(['a', 'b', 'c'].map((user) => decideLimit(scripts, bucket, keyOf(user), 1)));
      expect((await batch()).map((o) => o.remaining)).toEqual([9, 9, 9]);
      await redis.script('FLUSH');
      await redis.config('RESETSTAT');
      expect((await batch()).map((o) => o.remaining)).toEqual([8, 8, 8]);
      const stats = await redis.info('commandstats');
      expect(stats).toMatch(/^cmdstat_eval:calls=1,/m);
      expect(stats).not.toMatch(/^cmdstat_fcall:/m);
    } finally {
      await scripts.close();
    }
  });

  it('Redis busy (BUSY, a transient error of the whole script call): every call of the batch fails as StoreUnavailableError', async () => {
    await redis.config('SET', 'busy-reply-threshold', '10');
    const looping = server().client();
    const loop = looping.eval('while true do end', 0).catch((error: unknown) => error);
    try {
      // Wait (no sleep) until Redis answers BUSY, so the batch surely meets the running script.
      for (;;) {
        const answer = await redis.ping().catch((error: Error) => error.message);
        if (typeof answer === 'string' && answer.startsWith('BUSY')) break;
      }
      const settled = await Promise.allSettled(['a', 'b', 'c'].map((user) => decideLimit(f.store, bucket, keyOf(user), 1)));
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
      for (const s of settled) expect((s as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
      // The same batch decided together: every answer is that error.
      const together = await decideGroups(
        f.store,
        ['a', 'b', 'c'].map((user) => [{ limit: bucket, identityKey: keyOf(user), cost: 1 }]),
        'spend',
      );
      for (const answer of together) expect(answer).toBeInstanceOf(StoreUnavailableError);
    } finally {
      await redis.script('KILL');
      await loop;
      looping.disconnect();
      await redis.config('SET', 'busy-reply-threshold', '5000');
    }
  });
});
