import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { limitFrom, memoryFixture, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

// The order endpoint's bucket, capacity 10, refill 2 tokens/s.
const orders = limitFrom({ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
const KEY = identityKey('orders', 'user', '42');

const redis = useRedisServer();

describe.each(bothStores(redis))('token bucket on the %s store: tokens and last refill time, refilled on each decision', (_name, makeFixture) => {
  let f: StoreFixture;
  const spend = (cost = 1) => decideLimit(f.store, orders, KEY, cost);

  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('state key is rl:v1:<limit>:<key_by>:{<identity>}, the identity in a hash tag', async () => {
    await spend();
    expect(await f.keys()).toEqual(['rl:v1:orders:user:{42}']);
  });

  it('no bucket, first request: created full, then decided (9 left, ts = now)', async () => {
    const outcome = await spend();
    expect(outcome).toEqual({ allowed: true, retryAfterMs: 0, remaining: 9, resetAfterMs: 500 });
    expect(await f.tokenBucket(KEY)).toEqual({ tokens: 9, ts: T0 });
  });

  it('bucket with tokens >= 1: one token spent, allowed, retry 0', async () => {
    await spend();
    f.clock.advance(100); // refills 0.2
    const outcome = await spend();
    expect(outcome.allowed).toBe(true);
    expect(outcome.retryAfterMs).toBe(0);
    expect(outcome.remaining).toBeCloseTo(8.2, 12);
    expect(await f.tokenBucket(KEY)).toEqual({ tokens: outcome.remaining, ts: T0 + 100 });
  });

  it('bucket with tokens < 1: tokens unchanged after refill, denied, retry = ceil((1 - tokens) * 1000 / rate)', async () => {
    for (let i = 0; i < 10; i++) expect((await spend()).allowed).toBe(true);
    f.clock.advance(150); // refills 0.3
    const outcome = await spend();
    expect(outcome.allowed).toBe(false);
    expect(outcome.retryAfterMs).toBe(Math.ceil(((1 - 0.3) * 1000) / 2)); // 350
    expect(outcome.remaining).toBeCloseTo(0.3, 12);
    expect(await f.tokenBucket(KEY)).toEqual({ tokens: outcome.remaining, ts: T0 + 150 });
  });

  it('refill is capped at capacity', async () => {
    await spend(4);
    f.clock.advance(60_000);
    expect((await spend()).remaining).toBe(9);
  });

  it('a clock that steps back refills nothing (elapsed = max(0, now - ts))', async () => {
    f.clock.advance(1_000);
    await spend(5);
    f.clock.advance(-500);
    const outcome = await spend();
    expect(outcome.remaining).toBe(4);
  });

  it('expiry is ceil(capacity * 2000 / rate) = 10 s and refreshed by every request', async () => {
    await spend();
    const ttl = await f.ttl(KEY);
    expect(ttl).toBeGreaterThan(10_000 - 1_000);
    expect(ttl).toBeLessThanOrEqual(10_000);
  });

  it('a weighted cost spends that many tokens; retry counts the missing part', async () => {
    expect(await spend(7.5)).toMatchObject({ allowed: true, remaining: 2.5 });
    expect(await spend(3)).toMatchObject({ allowed: false, retryAfterMs: 250, remaining: 2.5 });
  });

  it('a full bucket of 10 lets ten near-simultaneous requests pass, then the client waits for refill', async () => {
    const outcomes = await Promise.all(Array.from({ length: 15 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(10);
    f.clock.advance(500);
    expect((await spend()).allowed).toBe(true);
    expect((await spend()).allowed).toBe(false);
  });

  it('atomic: with one token left, 50 simultaneous requests allow exactly one', async () => {
    await spend(9);
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => spend()));
    expect(outcomes.filter((o) => o.allowed)).toHaveLength(1);
    expect(outcomes.filter((o) => !o.allowed).every((o) => o.retryAfterMs === 500)).toBe(true);
  });

  it('identities do not share a bucket', async () => {
    await spend(10);
    expect((await decideLimit(f.store, orders, identityKey('orders', 'user', '43'), 1)).allowed).toBe(true);
  });
});

describe('token bucket expiry: an idle bucket is dropped after twice its time to refill, and the next request starts full', () => {
  it('embedded store: after the expiry period of inactivity the bucket is gone and the next request starts full', async () => {
    const f = memoryFixture();
    await decideLimit(f.store, orders, KEY, 10);
    f.clock.advance(10_000);
    expect(await f.keys()).toEqual([KEY]); // still there at exactly the TTL, as in Redis
    f.clock.advance(1);
    expect(await f.keys()).toEqual([]);
    expect(await decideLimit(f.store, orders, KEY, 1)).toMatchObject({ allowed: true, remaining: 9 });
  });

  it('Redis: the key expires on Redis time and the next request starts full', async () => {
    // Redis expires keys on its own clock, so this one runs on real time with a short TTL:
    // capacity 1 at 100 tokens/s lives ceil(1 * 2000 / 100) = 20 ms.
    const quick = limitFrom({ name: 'quick', key_by: 'user', algorithm: 'token_bucket', capacity: 1, refill_per_second: 100 });
    const { RedisStore } = await import('../../src/store/redis/redis-store.js');
    const client = redis().client();
    const store = new RedisStore(redis().client());
    const key = identityKey('quick', 'user', '42');
    // The expiry as an instant on Redis's clock (PEXPIRETIME), between 20 ms after the
    // Redis time before the decision and 20 ms after the one after it: exact however
    // slowly this test runs (a PTTL read could find the key gone already).
    const redisNow = async () => {
      const [seconds, micros] = await client.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    const before = await redisNow();
    expect(await decideLimit(store, quick, key, 1)).toMatchObject({ allowed: true, remaining: 0 });
    const after = await redisNow();
    const expiresAt = Number(await client.call('PEXPIRETIME', key));
    // -2: the key is gone already, which it may be only once its 20 ms have passed.
    if (expiresAt === -2) expect(await redisNow()).toBeGreaterThanOrEqual(before + 20);
    else {
      expect(expiresAt).toBeGreaterThanOrEqual(before + 20);
      expect(expiresAt).toBeLessThanOrEqual(after + 20);
    }
    const deadline = Date.now() + 2_000;
    while ((await client.exists(key)) === 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(await client.exists(key)).toBe(0);
    expect(await decideLimit(store, quick, key, 1)).toMatchObject({ allowed: true, remaining: 0 });
  });
});
