import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey, type Limit, type LimitCall } from '@quota-service/core';
import { clearOfRealExpiry, startTime, timeStep } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideAll } from '../support/store-calls.js';

/**
 * The driver (src/store/redis/script/decide.lua and MemoryStore.decideAll) checks
 * every limit of a call first and then writes all or none, tested here
 * directly on the stores (the engine's use of it, across slots too, is in
 * test/engine/all-or-nothing.test.ts).
 */
const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
const window = limitFrom({ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' });
const every: Limit[] = [
  bucket,
  window,
  limitFrom({ name: 'log', key_by: 'user', algorithm: 'sliding_window_log', limit: 4, window: 'second' }),
  limitFrom({ name: 'counter', key_by: 'user', algorithm: 'sliding_window_counter', limit: 5, window: 'second' }),
  limitFrom({ name: 'police', key_by: 'user', algorithm: 'leaky_bucket', capacity: 6, leak_per_second: 3 }),
  limitFrom({ name: 'shape', key_by: 'user', algorithm: 'leaky_bucket', capacity: 6, leak_per_second: 3, mode: 'shaping' }),
  limitFrom({ name: 'gcra', key_by: 'user', algorithm: 'gcra', capacity: 7, refill_per_second: 4 }),
];
const calls = (limits: Limit[], who = '42', cost = 1): LimitCall[] =>
  limits.map((limit) => ({ limit, identityKey: identityKey(limit.name, limit.keyBy, who), cost }));

const redis = useRedisServer();

describe.each(bothStores(redis))('driver on the %s store: check every limit, then write all or none', (_name, makeFixture) => {
  let f: StoreFixture;
  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('all allow: every limit spends', async () => {
    const outcomes = await decideAll(f.store, calls([bucket, window]), 'spend');
    expect(outcomes.map((o) => [o.allowed, o.remaining])).toEqual([
      [true, 9],
      [true, 2],
    ]);
    expect(await f.tokenBucket('rl:v1:bucket:user:{42}')).toEqual({ tokens: 9, ts: T0 });
  });

  it('one denies: the limits that passed spend nothing', async () => {
    for (let i = 0; i < 3; i++) await decideAll(f.store, calls([bucket, window]), 'spend');
    const outcomes = await decideAll(f.store, calls([bucket, window]), 'spend');
    expect(outcomes.map((o) => o.allowed)).toEqual([true, false]);
    expect(await f.tokenBucket('rl:v1:bucket:user:{42}')).toEqual({ tokens: 7, ts: T0 });
  });

  it('peek: the same decisions, nothing written, no key created', async () => {
    const peeked = await decideAll(f.store, calls(every, '42', 0), 'peek');
    expect(peeked.map((o) => o.remaining)).toEqual([10, 3, 4, 5, 6, 6, 7]);
    expect(await f.keys()).toEqual([]);
    await decideAll(f.store, calls(every), 'spend');
    const keys = await f.keys();
    expect((await decideAll(f.store, calls(every, '42', 0), 'peek')).map((o) => o.remaining)).toEqual([9, 2, 3, 4, 5, 5, 6]);
    expect(await f.keys()).toEqual(keys);
  });
});

describe('driver properties', () => {
  it('Lua equals model for a request spanning every algorithm at once, spend and peek', async () => {
    const lua = redisFixture(redis());
    const model = memoryFixture();
    await fc.assert(
      fc.asyncProperty(
        startTime,
        fc.array(fc.tuple(timeStep, fc.integer({ min: 1, max: 3 }), fc.subarray(every, { minLength: 1 }), fc.boolean()), { minLength: 1, maxLength: 30 }),
        async (start, raw) => {
          await Promise.all([lua.reset(), model.reset()]);
          let now = clearOfRealExpiry(start);
          for (const [i, [step, cost, limits, peek]] of raw.entries()) {
            now = clearOfRealExpiry(now + step);
            lua.clock.set(now);
            model.clock.set(now);
            const batch = calls(limits, '7', peek ? 0 : cost);
            const mode = peek ? 'peek' : 'spend';
            expect(await decideAll(lua.store, batch, mode), `step ${i}`).toEqual(await decideAll(model.store, batch, mode));
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});
