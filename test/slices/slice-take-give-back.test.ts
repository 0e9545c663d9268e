import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { identityKey, type Limit, type SliceAnswer, type SliceOp } from '@quota-service/core';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { limitFrom, memoryFixture, redisFixture, type StoreFixture, T0 } from '../support/store-fixtures.js';
import { decideAll } from '../support/store-calls.js';
import { decideOne } from '../../src/store/store.js';

/**
 * What a slice may and may not do, on the embedded store and on Redis alike:
 * a take spends before anything is granted, at most share of what is
 * available and at most max_units; a give-back returns at most what the
 * holder took, once, never more than the limit holds, never into a later
 * window; a holder that never gives back loses its units.
 */
let server: RedisServer;
const fixtures: StoreFixture[] = [];
beforeAll(async () => {
  server = await startRedisServer();
  fixtures.push(memoryFixture(), redisFixture(server));
});
afterAll(async () => {
  await server?.stop();
});
beforeEach(async () => {
  await Promise.all(fixtures.map((f) => f.reset()));
});

const slices = { share: 0.1, max_units: 50, ttl_ms: 250 };
const bucket = limitFrom({ name: 'budget', key_by: 'tenant', algorithm: 'token_bucket', capacity: 1000, refill_per_second: 10, slices });
const gcra = limitFrom({ name: 'pace', key_by: 'tenant', algorithm: 'gcra', capacity: 1000, refill_per_second: 10, slices });
const window = limitFrom({ name: 'minute', key_by: 'tenant', algorithm: 'fixed_window', limit: 1000, window: 'minute', slices });
const keyOf = (limit: Limit) => identityKey(limit.name, limit.keyBy, 'acme');

async function slice(f: StoreFixture, limit: Limit, holder: string, op: SliceOp, giveBack = 0): Promise<SliceAnswer> {
  const decision = await decideOne(f.store, { mode: 'slice', calls: [{ limit, identityKey: keyOf(limit), cost: 0 }], holder, op, giveBack });
  return decision.slice!;
}
const remaining = async (f: StoreFixture, limit: Limit) => (await decideAll(f.store, [{ limit, identityKey: keyOf(limit), cost: 0 }], 'peek'))[0]!.remaining;
const spend = async (f: StoreFixture, limit: Limit, cost: number) => (await decideAll(f.store, [{ limit, identityKey: keyOf(limit), cost }], 'spend'))[0]!;

describe.each(['memory', 'redis'] as const)('slices on the %s store', (name) => {
  const fixture = () => fixtures.find((f) => f.name === name)!;

  it.each([bucket, gcra, window])('a take of $algorithm.name spends its units at once: share of what is available, at most max_units', async (limit) => {
    const f = fixture();
    f.clock.set(T0 + 1_000);
    const first = await slice(f, limit, 'h1', 'take');
    expect(first).toMatchObject({ taken: 50, validMs: 250, returned: 0 }); // min(0.1 x 1000, 50)
    expect(await remaining(f, limit)).toBe(950);
    await spend(f, limit, 900);
    const second = await slice(f, limit, 'h2', 'take');
    expect(second.taken).toBe(5); // 0.1 x 50
    expect(second.remaining).toBe(45);
    expect(await remaining(f, limit)).toBe(45);
  });

  it.each([bucket, gcra, window])('$algorithm.name: nothing is taken when a share of what is left is under one unit', async (limit) => {
    const f = fixture();
    f.clock.set(T0 + 1_000);
    await spend(f, limit, 991);
    expect(await slice(f, limit, 'h1', 'take')).toMatchObject({ taken: 0, validMs: 0, remaining: 9 });
    expect(await remaining(f, limit)).toBe(9);
    // Nothing was recorded: a give-back returns nothing.
    expect((await slice(f, limit, 'h1', 'give-back', 5)).returned).toBe(0);
    expect(await remaining(f, limit)).toBe(9);
  });

  it.each([bucket, gcra, window])('$algorithm.name: a give-back returns at most what the holder took, and only once', async (limit) => {
    const f = fixture();
    f.clock.set(T0 + 1_000);
    await spend(f, limit, 500);
    const taken = await slice(f, limit, 'h1', 'take');
    expect(taken.taken).toBe(50);
    expect(await remaining(f, limit)).toBe(450);
    expect((await slice(f, limit, 'h1', 'give-back', 80)).returned).toBe(50);
    expect(await remaining(f, limit)).toBe(500);
    expect((await slice(f, limit, 'h1', 'give-back', 80)).returned).toBe(0);
    expect(await remaining(f, limit)).toBe(500);
    // Another holder's give-back never reaches h1's slice.
    await slice(f, limit, 'h1', 'take');
    expect((await slice(f, limit, 'h2', 'give-back', 50)).returned).toBe(0);
  });

  it.each([bucket, gcra])('$algorithm.name: a give-back never fills the limit past its capacity', async (limit) => {
    const f = fixture();
    f.clock.set(T0 + 1_000);
    await slice(f, limit, 'h1', 'take'); // 50 taken of a full 1000
    f.clock.set(T0 + 1_200); // 2 units refilled meanwhile
    expect((await slice(f, limit, 'h1', 'give-back', 50)).returned).toBe(50);
    expect(await remaining(f, limit)).toBe(1000);
  });

  it('a take first gives back the previous slice, then takes anew, in one step', async () => {
    const f = fixture();
    f.clock.set(T0 + 1_000);
    await slice(f, window, 'h1', 'take');
    const again = await slice(f, window, 'h1', 'take', 30);
    expect(again).toMatchObject({ returned: 30, taken: 50 }); // 20 used: 1000 - 20 available, 0.1 of it capped at 50
    expect(await remaining(f, window)).toBe(930);
  });

  it('fixed window: a slice lasts no longer than its window, and is never given back into the next', async () => {
    const f = fixture();
    const windowStart = T0 + 60_000;
    f.clock.set(windowStart + 59_900);
    const taken = await slice(f, window, 'h1', 'take');
    expect(taken).toMatchObject({ taken: 50, validMs: 100 });
    f.clock.set(windowStart + 60_050); // the next window
    await spend(f, window, 10);
    expect((await slice(f, window, 'h1', 'give-back', 50)).returned).toBe(0);
    expect(await remaining(f, window)).toBe(990);
  });

  it.each([bucket, gcra, window])('$algorithm.name: a holder that never gives back loses its units; its record lapses', async (limit) => {
    const f = fixture();
    f.clock.set(T0 + 1_000);
    await spend(f, limit, 500);
    await slice(f, limit, 'h1', 'take');
    f.clock.set(T0 + 1_000 + 501); // past twice the slice's life
    const late = await slice(f, limit, 'h1', 'give-back', 50);
    expect(late.returned).toBe(0);
    // The 50 units stayed spent (a bucket refilled 5.01 meanwhile, capped by nothing).
    const expected = limit.algorithm.name === 'fixed_window' ? 450 : 450 + 5.01;
    expect(await remaining(f, limit)).toBeCloseTo(expected, 9);
  });
});
