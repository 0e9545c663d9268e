import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * reserve(e) + settle(a) leaves the state allow(a) leaves, when nobody else
 * spent: identity x reserves e and settles a, identity y spends a at the
 * reservation's instant, after the same history; from then on both answer
 * alike (GetQuota now and later, and a spend later). A charge (a > e) is
 * settled at the reservation's instant (a charge spends at the settlement's
 * time); a refund (a <= e) any time later. Rates are exact binary fractions
 * (1000/512 per second), so the sums agree to the last bit.
 */
const ALGORITHMS: Record<string, Record<string, unknown>> = {
  tb: { algorithm: 'token_bucket', capacity: 10, refill_per_second: 1.953125 },
  gcra: { algorithm: 'gcra', capacity: 10, refill_per_second: 1.953125 },
  fw: { algorithm: 'fixed_window', limit: 10, window: 'minute' },
  swl: { algorithm: 'sliding_window_log', limit: 10, window: 'minute' },
  swc: { algorithm: 'sliding_window_counter', limit: 10, window: 'minute' },
  lb: { algorithm: 'leaky_bucket', capacity: 10, leak_per_second: 1.953125, mode: 'shaping' },
};
const POLICIES = parsePolicies(
  stringify({
    policies: Object.fromEntries(
      Object.entries(ALGORITHMS).map(([name, definition]) => [name, { request_id_ttl_ms: 86_400_000, limits: [{ name, key_by: 'user', ...definition }] }]),
    ),
  }),
);

const scenario = fc.record({
  start: fc.integer({ min: 0, max: 4_102_444_800_000 }),
  history: fc.array(fc.record({ dt: fc.integer({ min: 0, max: 20_000 }), cost: fc.integer({ min: 1, max: 5 }) }), { maxLength: 4 }),
  estimate: fc.integer({ min: 1, max: 10 }),
  actual: fc.integer({ min: 0, max: 10 }),
  settleAfter: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 200_000 })),
  later: fc.integer({ min: 0, max: 100_000 }),
  nextCost: fc.integer({ min: 1, max: 10 }),
});

describe('reserve(e) + settle(a) = allow(a)', () => {
  const redis = useRedisServer();

  /**
   * Virtual time past the full moment of any key Redis could let lapse on its
   * own clock meanwhile, and clear of a minute's end. A key's real TTL has run
   * since its write for at most the real time since the run's reset, so the
   * key is full once virtual time is that much past its TTL: whether Redis
   * still holds it or not, both identities then read alike.
   */
  async function clearOf(f: StoreFixture, now: number, resetAt: number): Promise<number> {
    let next = now;
    if (f.name === 'redis') {
      const client = redis().client();
      for (const key of await client.keys('*')) {
        const ttl = await client.pttl(key);
        if (ttl >= 0 && ttl < 5_000) next = Math.max(next, now + ttl + Math.ceil(performance.now() - resetAt) + 1);
      }
    }
    if (next % 60_000 > 55_000) next = next - (next % 60_000) + 60_000;
    return next;
  }

  for (const [name, make] of [
    ['memory', () => memoryFixture()],
    ['redis', () => redisFixture(redis())],
  ] as const) {
    it.each(Object.keys(ALGORITHMS))(`${name}: %s`, async (policy) => {
      const f = make();
      const engine = new QuotaEngine(POLICIES, f.store);
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          await f.reset();
          const resetAt = performance.now();
          const clear = (now: number) => clearOf(f, now, resetAt);
          let now = await clear(s.start);
          const both = (what: (user: string) => Promise<unknown>) => Promise.all([what('x'), what('y')]);
          for (const { dt, cost } of s.history) {
            now = await clear(now + dt);
            f.clock.set(now);
            await both((user) => engine.allow({ policy, identity: { user }, cost, requestId: '' }));
          }
          now = await clear(now);
          f.clock.set(now);
          const reserve = await engine.allow({ policy, identity: { user: 'x' }, cost: s.estimate, requestId: 'job' });
          // allow(0) is no spend at all (a cost of 0 in an Allow means 1).
          const spend = s.actual === 0 ? { allowed: true } : await engine.allow({ policy, identity: { user: 'y' }, cost: s.actual, requestId: '' });
          // Only a reservation allowed and a spend of a allowed compare.
          if (!reserve.allowed || !spend.allowed) return;
          if (s.actual <= s.estimate && s.settleAfter > 0) {
            now = await clear(now + s.settleAfter);
            f.clock.set(now);
          }
          const settled = await engine.settle({ policy, identity: { user: 'x' }, requestId: 'job', actualCost: s.actual });
          expect(settled).toMatchObject({ estimate: s.estimate, actualCost: s.actual, delta: s.actual - s.estimate, alreadySettled: false });
          // A refund can leave a key a few ms from full, which Redis may drop between the two reads.
          now = await clear(now);
          f.clock.set(now);
          const [x, y] = await both((user) => engine.getQuota({ policy, identity: { user } }));
          expect(x, JSON.stringify(s)).toEqual(y);
          now = await clear(now + s.later);
          f.clock.set(now);
          const [xLater, yLater] = await both((user) => engine.getQuota({ policy, identity: { user } }));
          expect(xLater, `later: ${JSON.stringify(s)}`).toEqual(yLater);
          const [xNext, yNext] = await both((user) => engine.allow({ policy, identity: { user }, cost: s.nextCost, requestId: '' }));
          expect(xNext, `next spend: ${JSON.stringify(s)}`).toEqual(yNext);
        }),
        { numRuns: 60 },
      );
    });
  }
});
