import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { identity, runBoth, startTime, timeStep } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

const threePerSecond = limitFrom({ name: 'tight', key_by: 'user', algorithm: 'sliding_window_log', limit: 3, window: 'second' });
const KEY = identityKey('tight', 'user', '42');

const redis = useRedisServer();

describe.each(bothStores(redis))('sliding window log on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  const spend = (cost = 1) => decideLimit(f.store, threePerSecond, KEY, cost);

  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('one entry per unit accepted under the identity key, expiring a window after the last accept', async () => {
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 2, resetAfterMs: 1_000 });
    expect(await f.keys()).toEqual(['rl:v1:tight:user:{42}']);
    expect(await f.logSize(KEY)).toBe(1);
    const ttl = await f.ttl(KEY);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_000);
  });

  it('requests of the same millisecond are logged apart, not collapsed', async () => {
    await Promise.all([spend(), spend(), spend()]);
    expect(await f.logSize(KEY)).toBe(3);
    expect((await spend()).allowed).toBe(false);
  });

  it('exact rolling window: a denial waits for the oldest entry to leave, and stores nothing', async () => {
    await spend();
    f.clock.advance(200);
    await spend();
    f.clock.advance(200);
    await spend();
    f.clock.advance(100);
    expect(await spend()).toEqual({ allowed: false, retryAfterMs: 500, remaining: 0, resetAfterMs: 900 });
    expect(await f.logSize(KEY)).toBe(3);
    f.clock.advance(499);
    expect((await spend()).allowed).toBe(false);
    f.clock.advance(1); // the first entry (T0) is now a full window old
    expect(await spend()).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('a weighted cost logs that many entries; one that does not fit waits for enough of them to leave', async () => {
    await spend(2);
    f.clock.advance(300);
    expect(await spend(2)).toEqual({ allowed: false, retryAfterMs: 700, remaining: 1, resetAfterMs: 700 });
    expect(await spend(1)).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1_000 });
  });

  it('the log is capped at the limit: old entries are dropped as new ones are logged', async () => {
    for (let i = 0; i < 20; i++) {
      await spend();
      f.clock.advance(150);
      expect(await f.logSize(KEY)).toBeLessThanOrEqual(3);
    }
  });

  it('concurrent requests never exceed the limit', async () => {
    const outcomes = await Promise.all(Array.from({ length: 30 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(3);
  });
});

describe('sliding window log properties', () => {
  it('Lua equals model: same decisions, retry, remaining, reset, and peeks; retry_after_ms holds', async () => {
    const lua = redisFixture(redis());
    const model = memoryFixture();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('second', 'minute'),
        fc.integer({ min: 1, max: 20 }),
        startTime,
        fc.array(fc.tuple(timeStep, fc.integer({ min: 1, max: 20 }), identity), { minLength: 1, maxLength: 40 }),
        async (window, max, start, raw) => {
          const limit = limitFrom({ name: 'swl', key_by: 'user', algorithm: 'sliding_window_log', limit: max, window });
          await runBoth(
            lua,
            model,
            limit,
            start,
            raw.map(([step, cost, who]) => ({ step, cost: Math.min(cost, max), who })),
            { retryHolds: true },
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('never admits more than limit in any window of the period', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 100 }),
        async (max, raw) => {
          const f = memoryFixture();
          const limit = limitFrom({ name: 'swl', key_by: 'user', algorithm: 'sliding_window_log', limit: max, window: 'second' });
          const admitted: { at: number; cost: number }[] = [];
          for (const [step, cost] of raw) {
            f.clock.advance(step);
            if (cost <= max && (await decideLimit(f.store, limit, KEY, cost)).allowed) admitted.push({ at: f.clock.now(), cost });
          }
          for (const { at } of admitted) {
            const units = admitted.filter((a) => a.at > at - 1_000 && a.at <= at).reduce((n, a) => n + a.cost, 0);
            expect(units).toBeLessThanOrEqual(max);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
