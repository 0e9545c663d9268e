import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { identity, runBoth, startTime, timeStep } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

const leaky = (mode: string, capacity = 10, leak = 2) =>
  limitFrom({ name: 'downstream', key_by: 'user', algorithm: 'leaky_bucket', capacity, leak_per_second: leak, mode });
const policing = leaky('policing');
const shaping = leaky('shaping');
const KEY = identityKey('downstream', 'user', '42');

const redis = useRedisServer();

describe.each(bothStores(redis))('leaky bucket on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  const spend = (limit = policing, cost = 1) => decideLimit(f.store, limit, KEY, cost);

  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('policing: fills up to capacity, then rejects until enough has leaked out', async () => {
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 9, resetAfterMs: 500 });
    expect(await f.keys()).toEqual(['rl:v1:downstream:user:{42}']);
    const outcomes = await Promise.all(Array.from({ length: 14 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(9);
    expect(outcomes.filter((o) => !o.allowed).every((o) => o.retryAfterMs === 500 && o.delayMs === undefined)).toBe(true);
    f.clock.advance(500);
    expect(await spend()).toMatchObject({ allowed: true, remaining: 0 });
    expect((await spend()).allowed).toBe(false);
  });

  it('the key expires when the bucket has drained (absent = empty); a denial writes nothing', async () => {
    await spend(policing, 4);
    const ttl = await f.ttl(KEY);
    expect(ttl).toBeGreaterThan(2_000 - 1_000);
    expect(ttl).toBeLessThanOrEqual(2_000);
    await spend(policing, 6);
    expect(await spend(policing, 1)).toMatchObject({ allowed: false, retryAfterMs: 500 });
    f.clock.advance(1_000); // 2 leaked: two fit (not one, as if the denial had been added)
    expect(await spend(policing, 2)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('shaping: each admitted request waits for the units queued ahead; the full queue rejects with retry_after_ms', async () => {
    const delays = [];
    for (let i = 0; i < 10; i++) {
      const outcome = await spend(shaping);
      expect(outcome.allowed).toBe(true);
      delays.push(outcome.delayMs ?? 0);
    }
    expect(delays).toEqual([0, 500, 1_000, 1_500, 2_000, 2_500, 3_000, 3_500, 4_000, 4_500]);
    expect(await spend(shaping)).toEqual({ allowed: false, retryAfterMs: 500, remaining: 0, resetAfterMs: 5_000 });
    f.clock.advance(2_000); // 4 served
    expect(await spend(shaping)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 3, resetAfterMs: 3_500, delayMs: 3_000 });
  });

  it('shaping: a clock that steps back drains nothing', async () => {
    f.clock.advance(1_000);
    await spend(shaping, 5);
    f.clock.advance(-500);
    expect(await spend(shaping)).toMatchObject({ allowed: true, delayMs: 2_500, remaining: 4 });
  });
});

describe('leaky bucket properties', () => {
  it.each(['policing', 'shaping'])('Lua equals model (%s): same decisions, retry, remaining, reset, delay, and peeks', async (mode) => {
    const lua = redisFixture(redis());
    const model = memoryFixture();
    // leak <= 5 x capacity and every cost >= leak / 5 keep each write's TTL at 200 ms or more.
    const params = fc
      .record({
        capacity: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.double({ min: 1, max: 1_000, noNaN: true })),
        perCapacity: fc.oneof(fc.constantFrom(0.2, 0.5, 1, 3), fc.double({ min: 0.001, max: 5, noNaN: true })),
      })
      .map(({ capacity, perCapacity }) => ({ capacity, leak: capacity * perCapacity }));
    const steps = fc.array(fc.tuple(timeStep, fc.double({ min: 0, max: 1, noNaN: true }), identity), { minLength: 1, maxLength: 40 });
    await fc.assert(
      fc.asyncProperty(params, startTime, steps, async ({ capacity, leak }, start, raw) => {
        const limit = leaky(mode, capacity, leak);
        const cost = (share: number) => Math.min(capacity, Math.max(leak / 5, share < 0.3 ? 1 : share * capacity));
        await runBoth(
          lua,
          model,
          limit,
          start,
          raw.map(([step, share, who]) => ({ step, cost: cost(share), who })),
        );
      }),
      { numRuns: 100 },
    );
  });

  it('shaping: admitted work starts at the leak rate (a steady downstream) and no request waits past the bounded queue', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(0.5, 1, 2, 3, 10),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 700 }), fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 80 }),
        async (capacity, rate, raw) => {
          const f = memoryFixture();
          const limit = leaky('shaping', capacity, rate);
          const starts: { at: number; cost: number }[] = [];
          for (const [step, cost] of raw) {
            f.clock.advance(step);
            if (cost > capacity) continue;
            const outcome = await decideLimit(f.store, limit, KEY, cost);
            if (!outcome.allowed) continue;
            const delay = outcome.delayMs ?? 0;
            expect(delay).toBeLessThanOrEqual(Math.ceil(((capacity - cost) * 1000) / rate));
            starts.push({ at: f.clock.now() + delay, cost });
          }
          // Each start comes at least the previous request's service time after it (1 ms of rounding).
          for (let i = 1; i < starts.length; i++) {
            const [before, after] = [starts[i - 1]!, starts[i]!];
            expect(after.at - before.at).toBeGreaterThanOrEqual((before.cost * 1000) / rate - 1);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
