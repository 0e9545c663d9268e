import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { NotFoundError, parsePolicies, requestKey, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import type { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { memoryFixture, redisFixture, type StoreFixture, T0 } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * A reservation settles once: a second Settle, whatever its actual cost,
 * answers the first settlement and writes nothing (a property, on the
 * embedded store and a single Redis node); many Settles at once on real Redis
 * settle it exactly once; an expired reservation on real Redis is NOT_FOUND
 * and keeps its estimate spent.
 */
const ALGORITHMS: Record<string, Record<string, unknown>> = {
  tb: { algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 },
  gcra: { algorithm: 'gcra', capacity: 10, refill_per_second: 2 },
  fw: { algorithm: 'fixed_window', limit: 10, window: 'minute' },
  swl: { algorithm: 'sliding_window_log', limit: 10, window: 'minute' },
  swc: { algorithm: 'sliding_window_counter', limit: 10, window: 'minute' },
  lb: { algorithm: 'leaky_bucket', capacity: 10, leak_per_second: 0.5, mode: 'policing' },
};
const POLICIES = parsePolicies(
  stringify({
    policies: {
      ...Object.fromEntries(
        Object.entries(ALGORITHMS).map(([name, definition]) => [name, { request_id_ttl_ms: 86_400_000, limits: [{ name, key_by: 'user', ...definition }] }]),
      ),
      multi: {
        request_id_ttl_ms: 86_400_000,
        limits: [
          { name: 'm-user', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 },
          { name: 'm-tenant', key_by: 'tenant', algorithm: 'fixed_window', limit: 20, window: 'hour' },
        ],
      },
      short: { request_id_ttl_ms: 1_000, limits: [{ name: 'short', key_by: 'user', algorithm: 'token_bucket', capacity: 100, refill_per_second: 0.001 }] },
    },
  }),
);

const actual = fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constantFrom(0, 10, 40, 1e15));
const scenario = fc.record({
  start: fc.integer({ min: 0, max: 4_102_444_800_000 }),
  estimate: fc.integer({ min: 1, max: 8 }),
  /** Spends by others of the same identity's keys between the reservation and the first settlement. */
  others: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 3 }),
  first: actual,
  /** Time between the two settlements: 0 (then their limits[] match too) or later. */
  between: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 120_000 })),
  second: actual,
});

describe('a second Settle changes nothing and answers the first settlement', () => {
  const redis = useRedisServer();

  /**
   * Every key with its value and remaining life in ms (-1 for none). On the
   * embedded store the test clock is Redis's clock too, so a look is exact.
   */
  async function state(f: StoreFixture): Promise<Record<string, { value: unknown; ttl: number }>> {
    const out: Record<string, { value: unknown; ttl: number }> = {};
    if (f.name === 'memory') {
      for (const key of await f.keys()) out[key] = { value: structuredClone((f.store as MemoryStore).space.get(key, f.clock.now())), ttl: -1 };
      return out;
    }
    const client = redis().client();
    for (const key of await client.keys('*')) {
      const ttl = await client.pttl(key);
      const type = await client.type(key);
      const value = type === 'hash' ? await client.hgetall(key) : type === 'zset' ? await client.zrange(key, '0', '-1', 'WITHSCORES') : await client.get(key);
      out[key] = { value, ttl };
    }
    return out;
  }

  /**
   * Nothing was written between two looks: every key after is a key before
   * with the same value and no longer a life. A key may be gone only if Redis
   * could have let it lapse on its own real-time clock in between (a refund
   * can leave a bucket a few ms from full); a key the second Settle rewrote
   * would show a new value or a longer life.
   */
  function expectUnwritten(before: Record<string, { value: unknown; ttl: number }>, after: Record<string, { value: unknown; ttl: number }>, why: string) {
    for (const [key, now] of Object.entries(after)) {
      expect(before[key], `${why}: ${key} appeared`).toBeDefined();
      expect(now.value, `${why}: ${key}`).toEqual(before[key]!.value);
      if (before[key]!.ttl === -1) expect(now.ttl, `${why}: ${key} life`).toBe(-1);
      else expect(now.ttl, `${why}: ${key} life`).toBeLessThanOrEqual(before[key]!.ttl);
    }
    for (const [key, then] of Object.entries(before)) {
      if (key in after) continue;
      expect(then.ttl, `${why}: ${key} removed`).toBeGreaterThanOrEqual(0);
      expect(then.ttl, `${why}: ${key} removed`).toBeLessThan(5_000);
    }
  }

  for (const [name, make] of [
    ['memory', () => memoryFixture()],
    ['redis', () => redisFixture(redis())],
  ] as const) {
    it.each([...Object.keys(ALGORITHMS), 'multi'])(`${name}: %s`, async (policy) => {
      const f = make();
      const engine = new QuotaEngine(POLICIES, f.store);
      const identity = { user: 'x', tenant: 't' };
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          await f.reset();
          // Clear of an hour's end: the windows of this test roll over there.
          f.clock.set(s.start - (s.start % 3_600_000));
          const reserved = await engine.allow({ policy, identity, cost: s.estimate, requestId: 'job' });
          if (!reserved.allowed) return;
          for (const cost of s.others) await engine.allow({ policy, identity, cost, requestId: '' });
          const first = await engine.settle({ policy, identity, requestId: 'job', actualCost: s.first });
          expect(first).toMatchObject({ estimate: s.estimate, actualCost: s.first, alreadySettled: false });
          f.clock.advance(s.between);
          const before = await state(f);
          const second = await engine.settle({ policy, identity, requestId: 'job', actualCost: s.second });
          expectUnwritten(before, await state(f), JSON.stringify(s));
          const { limits: firstLimits, ...firstSettlement } = first;
          const { limits: secondLimits, ...secondSettlement } = second;
          expect(secondSettlement).toEqual({ ...firstSettlement, alreadySettled: true });
          if (s.between === 0) expect(secondLimits).toEqual(firstLimits);
          // And the limits say what a GetQuota says: nothing moved.
          expect(secondLimits).toEqual(await engine.getQuota({ policy, identity }));
        }),
        { numRuns: 25 },
      );
    });
  }
});

describe('Settle on real Redis', () => {
  const redis = useRedisServer();

  it('60 Settles at once from 6 replicas for one reservation: exactly one settles, the others answer its settlement', async () => {
    const clock = new VirtualClock(T0);
    await redis().client().flushdb();
    const stores = Array.from({ length: 6 }, () => new RedisStore(redis().client(), { clock: clock }));
    const replicas = stores.map((store) => new QuotaEngine(POLICIES, store));
    const identity = { user: 'x', tenant: 't' };
    expect((await replicas[0]!.allow({ policy: 'multi', identity, cost: 8, requestId: 'job' })).allowed).toBe(true);
    // Each replica sends 10 in one turn (one batched script call), the 6 replicas over their own connections.
    const settled = await Promise.all(
      Array.from({ length: 60 }, (_, i) => replicas[i % 6]!.settle({ policy: 'multi', identity, requestId: 'job', actualCost: i % 9 })),
    );
    const winners = settled.filter((s) => !s.alreadySettled);
    expect(winners).toHaveLength(1);
    const won = winners[0]!.actualCost;
    for (const s of settled) expect(s).toMatchObject({ estimate: 8, actualCost: won, delta: won - 8 });
    // Spent once at the actual cost: 8 reserved, then estimate - actual given back once.
    const [user, tenant] = (await replicas[0]!.getQuota({ policy: 'multi', identity })).map((l) => l.remaining);
    expect(user).toBe(10 - won);
    expect(tenant).toBe(20 - won);
    await Promise.all(stores.map((store) => store.close()));
  });

  it("an expired reservation (request_id_ttl_ms 1 s, Redis's own expiry) is NOT_FOUND, writes nothing, and its estimate stays spent", async () => {
    const f = redisFixture(redis());
    await f.reset();
    const engine = new QuotaEngine(POLICIES, f.store);
    const identity = { user: 'x' };
    expect((await engine.allow({ policy: 'short', identity, cost: 30, requestId: 'late' })).allowed).toBe(true);
    const memo = requestKey('short', 'user', 'x', 'user=x', 'late');
    // The record expires on Redis's clock, which no test clock moves: wait for exactly its time to live.
    const ttl = await f.ttl(memo);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_000);
    await new Promise((resolve) => setTimeout(resolve, ttl! + 1));
    expect(await redis().client().exists(memo)).toBe(0);
    const before = await f.keys();
    const bucket = await f.tokenBucket('rl:v1:short:user:{x}');
    await expect(engine.settle({ policy: 'short', identity, requestId: 'late', actualCost: 0 })).rejects.toSatisfy(
      (error) => error instanceof NotFoundError && /^request_id: no reservation/.test(error.message),
    );
    expect(await f.keys()).toEqual(before);
    expect(await f.tokenBucket('rl:v1:short:user:{x}')).toEqual(bucket);
    expect(bucket?.tokens).toBe(70);
  });
});
