import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { identity, runBoth, startTime, timeStep } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

// The shipped order bucket's parameters (capacity 10, 2 per second), as a GCRA.
const orders = limitFrom({ name: 'orders', key_by: 'user', algorithm: 'gcra', capacity: 10, refill_per_second: 2 });
const KEY = identityKey('orders', 'user', '42');

const redis = useRedisServer();

describe.each(bothStores(redis))('GCRA on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  const spend = (cost = 1, limit = orders) => decideLimit(f.store, limit, KEY, cost);

  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('state is one timestamp under the identity key: when the limit is full again', async () => {
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 9, resetAfterMs: 500 });
    expect(await f.keys()).toEqual(['rl:v1:orders:user:{42}']);
    expect(await f.counter(KEY)).toBe(T0 + 500);
  });

  it('the key expires when the limit would be full again (absent = full)', async () => {
    await spend(4);
    const ttl = await f.ttl(KEY);
    expect(ttl).toBeGreaterThan(2_000 - 1_000);
    expect(ttl).toBeLessThanOrEqual(2_000);
  });

  it('a full burst of 10 lets ten simultaneous requests pass, then the client waits for refill', async () => {
    const outcomes = await Promise.all(Array.from({ length: 15 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(10);
    f.clock.advance(500);
    expect((await spend()).allowed).toBe(true);
    expect((await spend()).allowed).toBe(false);
  });

  it('a denial says when the missing units will have refilled, like a token bucket, and writes nothing', async () => {
    await spend(10);
    f.clock.advance(150); // 0.3 refilled
    const outcome = await spend();
    expect(outcome).toMatchObject({ allowed: false, retryAfterMs: 350, resetAfterMs: 4_850 });
    expect(outcome.remaining).toBeCloseTo(0.3, 12);
    expect(await f.counter(KEY)).toBe(T0 + 5_000);
  });

  it('rounding never denies the last unit of a full burst (rate 3/s: interval 333.33.. ms)', async () => {
    const thirds = limitFrom({ name: 'orders', key_by: 'user', algorithm: 'gcra', capacity: 10, refill_per_second: 3 });
    const outcomes = [];
    for (let i = 0; i < 11; i++) outcomes.push(await spend(1, thirds));
    expect(outcomes.map((o) => o.allowed)).toEqual([...Array(10).fill(true), false]);
    expect(outcomes[10]?.retryAfterMs).toBe(334);
  });

  it('a weighted cost spends that many units; a clock stepping back makes it stricter, never more generous', async () => {
    f.clock.advance(1_000);
    expect(await spend(7.5)).toMatchObject({ allowed: true, remaining: 2.5 });
    // One timestamp cannot tell "refilled nothing" from "refilled less": 500 ms back = 1 unit less.
    f.clock.advance(-500);
    expect(await spend(3)).toMatchObject({ allowed: false, retryAfterMs: 750, remaining: 1.5 });
  });
});

describe('GCRA properties', () => {
  it('Lua equals model: same decisions, retry, remaining (bit for bit), reset, and peeks; retry_after_ms holds', async () => {
    const lua = redisFixture(redis());
    const model = memoryFixture();
    // rate <= 5 x capacity and every cost >= rate / 5 keep each write's TTL at 200 ms or more.
    const params = fc
      .record({
        capacity: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.double({ min: 1, max: 1_000, noNaN: true })),
        perCapacity: fc.oneof(fc.constantFrom(0.2, 0.5, 1, 3), fc.double({ min: 0.001, max: 5, noNaN: true })),
      })
      .map(({ capacity, perCapacity }) => ({ capacity, rate: Math.min(10_000, capacity * perCapacity) }));
    const steps = fc.array(fc.tuple(timeStep, fc.double({ min: 0, max: 1, noNaN: true }), identity), { minLength: 1, maxLength: 40 });
    await fc.assert(
      fc.asyncProperty(params, startTime, steps, async ({ capacity, rate }, start, raw) => {
        const limit = limitFrom({ name: 'g', key_by: 'user', algorithm: 'gcra', capacity, refill_per_second: rate });
        const floor = rate / 5;
        const cost = (share: number) => Math.min(capacity, Math.max(floor, share < 0.3 ? 1 : share * capacity));
        await runBoth(
          lua,
          model,
          limit,
          start,
          raw.map(([step, share, who]) => ({ step, cost: cost(share), who })),
          { retryHolds: true },
        );
      }),
      { numRuns: 150 },
    );
  });

  it('never admits more than capacity + rate * T over any interval T (to its 10 µs slack)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(0.5, 1, 2, 3, 7, 10, 1_000),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 700 }), fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 80 }),
        async (capacity, rate, raw) => {
          const f = memoryFixture();
          const limit = limitFrom({ name: 'g', key_by: 'user', algorithm: 'gcra', capacity, refill_per_second: rate });
          const admitted: { at: number; cost: number }[] = [];
          for (const [step, cost] of raw) {
            f.clock.advance(step);
            if (cost <= capacity && (await decideLimit(f.store, limit, KEY, cost)).allowed) admitted.push({ at: f.clock.now(), cost });
          }
          for (const [i, first] of admitted.entries()) {
            let units = 0;
            for (const later of admitted.slice(i)) {
              units += later.cost;
              expect(units).toBeLessThanOrEqual(capacity + (rate * (later.at - first.at + 0.01)) / 1000 + 1e-9);
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
