import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WINDOWS, type WindowName } from '../../clients/core/src/algorithms/fixed-window/model.js';
import { identityKey, type Limit } from '@quota-service/core';
import { clearOfRealExpiry, identity, runBoth as runBothStores, timeStep, type Step } from '../support/lua-vs-model.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { limitFrom, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { decideLimit } from '../support/store-calls.js';

/**
 * "One algorithm, two bodies, proven equal": the Lua script on a real Redis
 * (time injected) and the TypeScript model (virtual clock) see the same random
 * sequence of time steps, costs and identities and must give identical outcomes
 * (decision, retry, remaining to the last bit, reset), for spends and for the
 * peeks before them (test/support/lua-vs-model.ts).
 */
let server: RedisServer;
let lua: StoreFixture;
let model: StoreFixture;
beforeAll(async () => {
  server = await startRedisServer();
  lua = redisFixture(server, { ready: true });
  model = memoryFixture();
});
afterAll(async () => {
  await server?.stop();
});

const runBoth = (limit: Limit, start: number, steps: Step[], options?: { retryHolds?: boolean }) => runBothStores(lua, model, limit, start, steps, options);

describe('Lua equals model', () => {
  it('token bucket: same decisions, retry, remaining (bit for bit) and reset', async () => {
    // rate <= 10 x capacity keeps the bucket TTL (capacity * 2000 / rate) at 200 ms or more.
    const params = fc
      .record({
        capacity: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.double({ min: 1, max: 1_000, noNaN: true })),
        perCapacity: fc.oneof(fc.constantFrom(0.2, 0.5, 1), fc.double({ min: 0.001, max: 10, noNaN: true })),
      })
      .map(({ capacity, perCapacity }) => ({ capacity, rate: capacity * perCapacity }));
    await fc.assert(
      fc.asyncProperty(
        params,
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        fc.array(fc.tuple(timeStep, fc.double({ min: 0, max: 1, noNaN: true }), identity), { minLength: 1, maxLength: 40 }),
        async ({ capacity, rate }, start, raw) => {
          const limit = limitFrom({ name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity, refill_per_second: rate });
          // Costs from a tiny fraction up to the whole capacity, some of them whole numbers.
          const steps = raw.map(([step, share, who]) => ({ step, cost: share < 0.3 ? 1 : Math.max(Number.MIN_VALUE, share * capacity), who }));
          await runBoth(
            limit,
            start,
            steps.map((s) => ({ ...s, cost: Math.min(s.cost, capacity) })),
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('fixed window: same decisions, retry, remaining and reset, across every window unit; retry_after_ms holds', async () => {
    const windowName = fc.constantFrom(...(Object.keys(WINDOWS) as WindowName[]));
    await fc.assert(
      fc.asyncProperty(
        windowName,
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        fc.array(fc.tuple(timeStep, fc.integer({ min: 1, max: 20 }), identity), { minLength: 1, maxLength: 40 }),
        async (window, max, start, raw) => {
          const limit = limitFrom({ name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: max, window });
          await runBoth(
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

  it('windows written as lengths (15m, 90s, 1h30m, 45s): every windowed algorithm, same decisions, retry, remaining and reset; retry_after_ms holds', async () => {
    const algorithm = fc.constantFrom('fixed_window', 'sliding_window_log', 'sliding_window_counter');
    const window = fc.constantFrom('15m', '90s', '1h30m', '45s', '2m30s');
    await fc.assert(
      fc.asyncProperty(
        algorithm,
        window,
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        // Time steps up to two windows of the longest (1h30m), so windows roll over.
        fc.array(fc.tuple(fc.oneof(timeStep, fc.integer({ min: 0, max: 10_800_000 })), fc.integer({ min: 1, max: 20 }), identity), {
          minLength: 1,
          maxLength: 40,
        }),
        async (algorithm, window, max, start, raw) => {
          const limit = limitFrom({ name: 'lw', key_by: 'user', algorithm, limit: max, window });
          expect(typeof (limit.params as { window: unknown }).window).toBe('number');
          await runBoth(
            limit,
            start,
            raw.map(([step, cost, who]) => ({ step, cost: Math.min(cost, max), who })),
            { retryHolds: true },
          );
        },
      ),
      {
        numRuns: 150,
        // Full just before a quarter hour (UTC), denied, then a new window on the quarter hour.
        examples: [
          [
            'fixed_window',
            '15m',
            3,
            Date.UTC(2026, 10, 21, 8, 14, 59),
            [
              [0, 3, '42'],
              [500, 1, '42'],
              [1_000, 3, '42'],
            ],
          ],
        ],
      },
    );
  });

  it('a 15m or 90s fixed window: the script counts in the same window as the model, aligned to multiples of its length since the epoch, in its one declared key', async () => {
    const client = server.client();
    const lengths = { '15m': 900_000, '90s': 90_000, '1h30m': 5_400_000 } as const;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...(Object.keys(lengths) as (keyof typeof lengths)[])),
        fc.integer({ min: 0, max: 7_258_118_400_000 }),
        async (window, time) => {
          await lua.reset();
          const now = clearOfRealExpiry(time);
          lua.clock.set(now);
          const limit = limitFrom({ name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 1, window });
          await decideLimit(lua.store, limit, identityKey('fw', 'user', '1'), 1);
          const ms = lengths[window];
          const key = `rl:v1:fw:user:{1}:${ms}ms`;
          expect(await client.keys('*')).toEqual([key]);
          expect(await client.hgetall(key)).toEqual({ w: String(now - (now % ms)), c: '1' });
        },
      ),
      { numRuns: 200 },
    );
  });

  it('fixed window: the script counts in the same UTC-aligned window as the model (1970-2200), in its one declared key', async () => {
    const client = server.client();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...(Object.keys(WINDOWS) as WindowName[])), fc.integer({ min: 0, max: 7_258_118_400_000 }), async (window, time) => {
        await lua.reset();
        const now = clearOfRealExpiry(time);
        lua.clock.set(now);
        const limit = limitFrom({ name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 1, window });
        await decideLimit(lua.store, limit, identityKey('fw', 'user', '1'), 1);
        const start = now - (now % WINDOWS[window].ms);
        expect(await client.keys('*')).toEqual([`rl:v1:fw:user:{1}:${window}`]);
        expect(await client.hgetall(`rl:v1:fw:user:{1}:${window}`)).toEqual({ w: String(start), c: '1' });
      }),
      {
        numRuns: 300,
        examples: [
          ['day', Date.UTC(2024, 1, 29, 23, 59, 59)],
          ['minute', Date.UTC(2099, 11, 31, 23, 59)],
          ['second', 0],
        ],
      },
    );
  });
});
