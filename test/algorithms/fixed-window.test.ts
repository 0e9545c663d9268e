import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { limitFrom, redisFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

// A fixed-window policy of 100 per minute.
const perMinute = limitFrom({ name: 'per-user', key_by: 'user', algorithm: 'fixed_window', limit: 100, window: 'minute' });
const IDENTITY = identityKey('per-user', 'user', '42');
// One declared key per identity and window length; it holds {w = window start, c = count}.
const COUNTER = 'rl:v1:per-user:user:{42}:minute';

const redis = useRedisServer();

describe.each(bothStores(redis))('fixed window on the %s store: one counter per window, reset when the window starts', (_name, makeFixture) => {
  let f: StoreFixture;
  const spend = (cost = 1) => decideLimit(f.store, perMinute, IDENTITY, cost);

  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('counter key is rl:v1:<limit>:<key_by>:{<id>}:minute, the one key the script declares', async () => {
    f.clock.advance(59_000); // Redis expires the counter on real time: leave it a second to live
    await spend();
    expect(await f.keys()).toEqual([COUNTER]);
    expect(perMinute.algorithm.scriptKeys(IDENTITY, perMinute.params)).toEqual([COUNTER]);
  });

  it('counter n below the limit: n + 1, allowed', async () => {
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 99, resetAfterMs: 60_000 });
    f.clock.advance(1_000);
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 98, resetAfterMs: 59_000 });
    expect(await f.counter(COUNTER)).toBe(2);
  });

  it('counter at the limit, same window: unchanged, rejected until the window ends', async () => {
    for (let i = 0; i < 100; i++) expect((await spend()).allowed).toBe(true);
    f.clock.advance(45_000);
    // The 101st request in a 100/min window is rejected.
    expect(await spend()).toEqual({ allowed: false, retryAfterMs: 15_000, remaining: 0, resetAfterMs: 15_000 });
    expect(await f.counter(COUNTER)).toBe(100);
  });

  it('window changes: a new counter starts at 1 on the first request, allowed', async () => {
    await spend(100);
    f.clock.advance(60_000);
    expect(await spend()).toEqual({ allowed: true, retryAfterMs: 0, remaining: 99, resetAfterMs: 60_000 });
    expect(await f.counter(COUNTER)).toBe(1);
  });

  it('a new counter is created with its expiry (the end of its window), so it never lives forever', async () => {
    f.clock.advance(20_000);
    await spend();
    const ttl = await f.ttl(COUNTER);
    expect(ttl).toBeGreaterThan(40_000 - 1_000);
    expect(ttl).toBeLessThanOrEqual(40_000);
    await spend(); // HINCRBY keeps the expiry
    expect(await f.ttl(COUNTER)).toBeLessThanOrEqual(40_000);
  });

  it('a rejected request writes nothing', async () => {
    await spend(100);
    const before = await f.keys();
    await spend();
    expect(await f.keys()).toEqual(before);
    expect(await f.counter(COUNTER)).toBe(100);
  });

  it('a weighted cost that does not fit is rejected whole, a smaller one still fits', async () => {
    await spend(95);
    expect((await spend(6)).allowed).toBe(false);
    expect(await spend(5)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('allows a burst of up to 2N across a window boundary', async () => {
    f.clock.advance(59_000);
    const late = await Promise.all(Array.from({ length: 100 }, () => spend()));
    f.clock.advance(1_000);
    const early = await Promise.all(Array.from({ length: 100 }, () => spend()));
    expect([...late, ...early].filter((o) => o.allowed)).toHaveLength(200); // within 1 s
  });

  it('concurrent requests never exceed the limit', async () => {
    await spend(99);
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(1);
  });
});

describe('fixed window units', () => {
  it.each([
    ['second', 'rl:v1:w:user:{42}:second', 1_000],
    ['hour', 'rl:v1:w:user:{42}:hour', 3_600_000],
    ['day', 'rl:v1:w:user:{42}:day', 16 * 3_600_000],
  ] as const)('%s windows are UTC-aligned, the counter carries its window start', async (window, key, resetAfterMs) => {
    const f = redisFixture(redis());
    await f.reset();
    const limit = limitFrom({ name: 'w', key_by: 'user', algorithm: 'fixed_window', limit: 5, window });
    expect(await decideLimit(f.store, limit, identityKey('w', 'user', '42'), 1)).toMatchObject({ allowed: true, resetAfterMs });
    expect(await f.keys()).toEqual([key]);
    // T0 = 2026-11-21T08:00:00Z starts a second, an hour, and sits 8 h into its UTC day.
    const start = window === 'day' ? T0 - 8 * 3_600_000 : T0;
    expect(await redis().client().hgetall(key)).toEqual({ w: String(start), c: '1' });
  });
});
