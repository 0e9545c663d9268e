import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { algorithms, identityKey, type Limit, type LimitCall } from '@quota-service/core';
import { clearOfRealExpiry, startTime, timeStep } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideAll, decideGroup } from '../support/store-calls.js';

/**
 * Two driver features Envoy's rate limit service needs: a check-only call
 * (decided at its cost with the others, all or nothing, never spent) and
 * windows of any length in milliseconds (a week, a 30-day month, 90 s).
 */
const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
const window = limitFrom({ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' });

/** A limit with a window given as a length, as the Envoy configuration builds it. */
function lengthLimit(name: string, algorithm: 'fixed_window' | 'sliding_window_log' | 'sliding_window_counter', limit: number, windowMs: number): Limit {
  return Object.freeze({
    name,
    keyBy: 'user',
    algorithm: algorithms[algorithm],
    params: { limit, window: windowMs },
    definition: { name, key_by: 'user', description: '', algorithm: 'fixed_window', limit, window: 'minute' },
  }) as Limit;
}
const ninety = lengthLimit('ninety', 'fixed_window', 2, 90_000);
const week = lengthLimit('week', 'fixed_window', 5, 7 * 86_400_000);
const slidingLog = lengthLimit('slog', 'sliding_window_log', 3, 90_000);
const slidingCounter = lengthLimit('scount', 'sliding_window_counter', 4, 45_000);

const call = (limit: Limit, cost = 1, checkOnly = false, who = '42'): LimitCall => ({
  limit,
  identityKey: identityKey(limit.name, limit.keyBy, who),
  cost,
  ...(checkOnly ? { checkOnly } : {}),
});

const redis = useRedisServer();

describe.each(bothStores(redis))('on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('a check-only call with a spending one: the spend happens, the check spends nothing and reports its status unchanged', async () => {
    const outcomes = await decideAll(f.store, [call(bucket, 4), call(window, 1, true)], 'spend');
    expect(outcomes.map((o) => [o.allowed, o.remaining])).toEqual([
      [true, 6],
      [true, 3],
    ]);
    expect(await f.tokenBucket('rl:v1:bucket:user:{42}')).toEqual({ tokens: 6, ts: T0 });
    expect(await f.counter('rl:v1:window:user:{42}:minute')).toBeUndefined();
  });

  it('a check that would not pass denies the whole call: nothing is spent anywhere', async () => {
    for (let i = 0; i < 3; i++) await decideAll(f.store, [call(window)], 'spend');
    const outcomes = await decideAll(f.store, [call(bucket, 4), call(window, 1, true)], 'spend');
    expect(outcomes.map((o) => o.allowed)).toEqual([true, false]);
    expect(outcomes[1]!.remaining).toBe(0);
    expect(await f.tokenBucket('rl:v1:bucket:user:{42}')).toBeUndefined();
    expect(await f.counter('rl:v1:window:user:{42}:minute')).toBe(3);
  });

  it('a lone check-only call spends nothing, however often', async () => {
    for (let i = 0; i < 5; i++) {
      const [outcome] = await decideAll(f.store, [call(window, 1, true)], 'spend');
      expect(outcome).toMatchObject({ allowed: true, remaining: 3 });
    }
    expect(await f.counter('rl:v1:window:user:{42}:minute')).toBeUndefined();
  });

  it('a refund gives back what the spending calls took and leaves a check-only call alone', async () => {
    await decideAll(f.store, [call(bucket, 2)], 'spend');
    const spent = await decideGroup(f.store, [call(bucket, 3), call(window, 1, true)], 'spend');
    expect(await f.tokenBucket('rl:v1:bucket:user:{42}')).toEqual({ tokens: 5, ts: T0 });
    await decideGroup(f.store, [call(bucket, 3), call(window, 1, true)], 'refund', { spentAtMs: spent.nowMs });
    expect(await f.tokenBucket('rl:v1:bucket:user:{42}')).toEqual({ tokens: 8, ts: T0 });
    expect(await f.counter('rl:v1:window:user:{42}:minute')).toBeUndefined();
  });

  it('a fixed window of 90 s: its own key, aligned to the epoch, 2 per window', async () => {
    const start = Math.ceil(T0 / 90_000) * 90_000;
    f.clock.set(start + 1_000);
    const first = await decideAll(f.store, [call(ninety), call(ninety, 1, false, '43')], 'spend');
    expect(first.map((o) => [o.allowed, o.remaining, o.resetAfterMs])).toEqual([
      [true, 1, 89_000],
      [true, 1, 89_000],
    ]);
    expect((await decideAll(f.store, [call(ninety)], 'spend'))[0]!.allowed).toBe(true);
    const denied = (await decideAll(f.store, [call(ninety)], 'spend'))[0]!;
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 89_000 });
    expect(await f.counter('rl:v1:ninety:user:{42}:90000ms')).toBe(2);
    f.clock.set(start + 90_000);
    expect((await decideAll(f.store, [call(ninety)], 'spend'))[0]).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 90_000 });
  });
});

describe('Lua equals model', () => {
  const limits = [bucket, window, ninety, week, slidingLog, slidingCounter];
  it('for random check-only flags and windows of any length, spend and refund', async () => {
    const lua = redisFixture(redis());
    const model = memoryFixture();
    await fc.assert(
      fc.asyncProperty(
        startTime,
        fc.array(
          fc.tuple(
            timeStep,
            fc
              .subarray(limits, { minLength: 1 })
              .chain((chosen) => fc.tuple(fc.constant(chosen), fc.array(fc.boolean(), { minLength: chosen.length, maxLength: chosen.length }))),
            fc.integer({ min: 1, max: 2 }),
            fc.boolean(),
          ),
          { minLength: 1, maxLength: 25 },
        ),
        async (start, steps) => {
          await Promise.all([lua.reset(), model.reset()]);
          let now = clearOfRealExpiry(start);
          for (const [i, [step, [chosen, checks], cost, refund]] of steps.entries()) {
            now = clearOfRealExpiry(now + step);
            lua.clock.set(now);
            model.clock.set(now);
            const batch = chosen.map((limit, j) => call(limit, cost, checks[j]!, '7'));
            const [a, b] = [await decideGroup(lua.store, batch, 'spend'), await decideGroup(model.store, batch, 'spend')];
            expect(a, `step ${i}`).toEqual(b);
            if (refund && a.outcomes.every((o) => o.allowed)) {
              const [ra, rb] = [
                await decideGroup(lua.store, batch, 'refund', { spentAtMs: a.nowMs }),
                await decideGroup(model.store, batch, 'refund', { spentAtMs: b.nowMs }),
              ];
              expect(ra, `refund ${i}`).toEqual(rb);
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
