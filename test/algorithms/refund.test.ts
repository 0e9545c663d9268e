import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { identityKey, type LimitCall } from '@quota-service/core';
import { clearOfRealExpiry, startTime } from '../support/lua-vs-model.js';
import { limitFrom, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';
import { decideAll, decideGroup } from '../support/store-calls.js';

/**
 * A refund gives back exactly what a spend took: after a spend and its refund
 * (at once or some ms later, as a cross-slot decision does), every later
 * decision is the one the limit would give had the spend never happened. Run
 * on the models (MemoryStore) and on the Lua functions (real Redis), each
 * against a twin store that never spent.
 *
 * Rates are chosen so that refills are exact binary fractions (1000 / 2^k per
 * second), where "the same" can mean bit for bit; with other rates the
 * token-bucket-like algorithms agree up to floating-point rounding of the
 * balance (docs/decide-script.md, "What a refund cannot restore").
 */
const LIMITS: Record<string, unknown>[] = [
  { name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1.953125 },
  { name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 6, window: 'minute' },
  { name: 'swl', key_by: 'user', algorithm: 'sliding_window_log', limit: 6, window: 'minute' },
  { name: 'swc', key_by: 'user', algorithm: 'sliding_window_counter', limit: 6, window: 'minute' },
  { name: 'lb', key_by: 'user', algorithm: 'leaky_bucket', capacity: 6, leak_per_second: 0.244140625 },
  { name: 'lb-shape', key_by: 'user', algorithm: 'leaky_bucket', capacity: 6, leak_per_second: 0.244140625, mode: 'shaping' },
  { name: 'gcra', key_by: 'user', algorithm: 'gcra', capacity: 10, refill_per_second: 1.953125 },
];

/** Time steps of a history: same ms, a few ms, seconds, past a window. */
const dt = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 120_000 }));
const move = fc.record({ dt, cost: fc.integer({ min: 1, max: 6 }) });

const redis = useRedisServer();

/**
 * Redis expires keys on its own real clock while the scripts run on virtual
 * time: a key left with under 200 ms to live could lapse between two steps
 * and make Redis differ from the model for that reason alone. A run stops
 * comparing (having compared every step before) once that happens.
 */
async function expiresSoon(f: StoreFixture): Promise<boolean> {
  if (f.name === 'memory') return false;
  for (const key of await f.keys()) if (((await f.ttl(key)) ?? Infinity) < 200) return true;
  return false;
}

describe.each([
  ['model', () => [memoryFixture(), memoryFixture()] as const],
  ['lua', () => [redisFixture(redis()), memoryFixture()] as const],
])('refund (%s): spend then refund = never spent', (_name, makeFixtures) => {
  it.each(LIMITS.map((d) => [d.name as string, d] as const))('%s', async (_limitName, definition) => {
    const limit = limitFrom(definition);
    const key = identityKey(limit.name, limit.keyBy, '42');
    const call = (cost: number): LimitCall[] => [{ limit, identityKey: key, cost }];
    let fixtures: readonly [StoreFixture, StoreFixture] | undefined;
    await fc.assert(
      fc.asyncProperty(
        startTime,
        fc.array(move, { maxLength: 8 }),
        move,
        fc.integer({ min: 0, max: 200 }),
        fc.array(move, { minLength: 1, maxLength: 8 }),
        async (start, before, spend, refundAfter, after) => {
          fixtures ??= makeFixtures();
          // `spent` spends and refunds; `twin` (the model) never spends. Both see the same history.
          const [spent, twin] = fixtures;
          const lua = spent.name !== 'memory';
          const both = [spent, twin] as const;
          await Promise.all(both.map((f) => f.reset()));
          let now = lua ? clearOfRealExpiry(start) : start;
          const at = (t: number) => both.forEach((f) => f.clock.set(t));
          const step = (ms: number) => (now = lua ? clearOfRealExpiry(now + ms) : now + ms);
          for (const m of before) {
            at(step(m.dt));
            for (const f of both) await decideAll(f.store, call(m.cost), 'spend');
          }
          if (await expiresSoon(spent)) return;
          at(step(spend.dt));
          const { outcomes, nowMs } = await decideGroup(spent.store, call(spend.cost), 'spend');
          at(step(refundAfter));
          if (outcomes[0]!.allowed) await decideGroup(spent.store, call(spend.cost), 'refund', { spentAtMs: nowMs });
          for (const [i, m] of after.entries()) {
            if (await expiresSoon(spent)) return;
            at(step(m.dt));
            const context = `after step ${i}`;
            expect(await decideAll(spent.store, call(0), 'peek'), context).toEqual(await decideAll(twin.store, call(0), 'peek'));
            expect(await decideAll(spent.store, call(m.cost), 'spend'), context).toEqual(await decideAll(twin.store, call(m.cost), 'spend'));
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
