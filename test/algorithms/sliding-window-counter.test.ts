import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { identity, runBoth, startTime, timeStep } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

const perMinute = limitFrom({ name: 'api', key_by: 'user', algorithm: 'sliding_window_counter', limit: 100, window: 'minute' });
const KEY = identityKey('api', 'user', '42');

const redis = useRedisServer();

describe.each(bothStores(redis))('sliding window counter on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  const spend = (cost = 1) => decideLimit(f.store, perMinute, KEY, cost);

  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('one key per identity, kept until the end of the next window (its count still weighs there)', async () => {
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 99, resetAfterMs: 120_000 });
    expect(await f.keys()).toEqual(['rl:v1:api:user:{42}']);
    const ttl = await f.ttl(KEY);
    expect(ttl).toBeGreaterThan(120_000 - 1_000);
    expect(ttl).toBeLessThanOrEqual(120_000);
  });

  it('estimated = current + previous * (1 - elapsed_fraction): 25% into the next window, 75 of 100 still count', async () => {
    await spend(100);
    f.clock.advance(60_000 + 15_000);
    expect(await spend(25)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 0, resetAfterMs: 105_000 });
    const denied = await spend();
    expect(denied).toMatchObject({ allowed: false, remaining: 0 });
    // Room for one more once previous * (1 - f) <= 100 - 1 - 25, i.e. f >= 0.26: 15.6 s into the window.
    expect(denied.retryAfterMs).toBe(600);
  });

  it('a full current window waits for the next one, where its count fades', async () => {
    f.clock.advance(30_000);
    await spend(100);
    // Next window at +30 s; there 100 * (1 - f) + 1 <= 100 from f = 0.01, 600 ms in.
    expect(await spend()).toEqual({ allowed: false, retryAfterMs: 30_600, remaining: 0, resetAfterMs: 90_000 });
  });

  it('a denial writes nothing; a window two back no longer counts', async () => {
    await spend(100);
    expect((await spend()).allowed).toBe(false);
    f.clock.advance(90_000); // half the 100 (not 101) still weigh
    expect(await spend(50)).toMatchObject({ allowed: true, remaining: 0 });
    f.clock.advance(120_000);
    expect(await spend(100)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('concurrent requests never exceed the limit', async () => {
    await spend(99);
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(1);
  });
});

describe('sliding window counter properties', () => {
  it('Lua equals model: same decisions, retry, remaining, reset, and peeks; retry_after_ms holds', async () => {
    const lua = redisFixture(redis());
    const model = memoryFixture();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('second', 'minute', 'hour'),
        fc.integer({ min: 1, max: 20 }),
        startTime,
        fc.array(fc.tuple(timeStep, fc.integer({ min: 1, max: 20 }), identity), { minLength: 1, maxLength: 40 }),
        async (window, max, start, raw) => {
          const limit = limitFrom({ name: 'swc', key_by: 'user', algorithm: 'sliding_window_counter', limit: max, window });
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

  it('documented error bound: at most limit per aligned window, and at most limit + f * previous in any rolling window', async () => {
    const W = 1_000;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 100 }),
        async (max, raw) => {
          const f = memoryFixture();
          const limit = limitFrom({ name: 'swc', key_by: 'user', algorithm: 'sliding_window_counter', limit: max, window: 'second' });
          const admitted: { at: number; cost: number }[] = [];
          for (const [step, cost] of raw) {
            f.clock.advance(step);
            if (cost <= max && (await decideLimit(f.store, limit, KEY, cost)).allowed) admitted.push({ at: f.clock.now(), cost });
          }
          const unitsIn = (from: number, to: number) => admitted.filter((a) => a.at >= from && a.at < to).reduce((n, a) => n + a.cost, 0);
          for (const { at } of admitted) {
            const start = at - (at % W);
            expect(unitsIn(start, start + W)).toBeLessThanOrEqual(max);
            const elapsed = (at - start) / W;
            expect(unitsIn(at - W + 1, at + 1)).toBeLessThanOrEqual(max + elapsed * unitsIn(start - W, start) + 1e-9);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

// T0 is aligned to the minute, as the examples above assume.
expect(T0 % 60_000).toBe(0);
