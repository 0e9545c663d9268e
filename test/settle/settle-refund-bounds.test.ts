import { beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { memoryFixture, redisFixture, type StoreFixture, T0 } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * What others spend between a reservation and its settlement stays spent: a
 * settlement gives back at most the estimate, never more than the limit
 * holds, and nothing that other calls spent, also once the reservation's
 * window has passed. Embedded store and a single Redis node, virtual time.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      tb: { limits: [{ name: 'tb', key_by: 'tenant', algorithm: 'token_bucket', capacity: 100, refill_per_second: 1 }] },
      fw: { limits: [{ name: 'fw', key_by: 'tenant', algorithm: 'fixed_window', limit: 100, window: 'minute' }] },
      swl: { limits: [{ name: 'swl', key_by: 'tenant', algorithm: 'sliding_window_log', limit: 10, window: 'minute' }] },
    },
  }),
);
const acme = { tenant: 'acme' };
/** T0 is on a minute's start. */
const MINUTE = 60_000;

describe.each(['memory', 'redis'] as const)('a refund gives back only the reservation, on %s', (kind) => {
  const redis = useRedisServer();
  let f: StoreFixture;
  let engine: QuotaEngine;
  beforeEach(async () => {
    f = kind === 'memory' ? memoryFixture() : redisFixture(redis());
    await f.reset();
    engine = new QuotaEngine(policies, f.store);
  });
  const reserve = (policy: string, cost: number) => engine.allow({ policy, identity: acme, cost, requestId: 'job' });
  /** Another caller of the tenant, spending without a reservation. */
  const spend = async (policy: string, cost: number) => expect((await engine.allow({ policy, identity: acme, cost, requestId: '' })).allowed).toBe(true);
  const settle = (policy: string, actualCost: number) => engine.settle({ policy, identity: acme, requestId: 'job', actualCost });
  const remaining = async (policy: string) => (await engine.getQuota({ policy, identity: acme }))[0]!.remaining;

  it('token bucket: the refund is the estimate at most, and never fills the bucket past its capacity', async () => {
    expect((await reserve('tb', 40)).limits[0]!.remaining).toBe(60);
    await spend('tb', 50);
    // Others took 50 meanwhile: the settlement gives back 40 (the whole estimate), not their 50.
    expect(await settle('tb', 0)).toMatchObject({ delta: -40, limits: [{ remaining: 50 }] });

    await f.reset();
    await reserve('tb', 40);
    f.clock.advance(30_000);
    await spend('tb', 50);
    // 60 + 30 refilled - 50 = 40; the refund of 30 (estimate 40 - actual 10) makes 70.
    expect((await settle('tb', 10)).limits[0]!.remaining).toBe(70);

    await f.reset();
    await reserve('tb', 40);
    f.clock.advance(40_000);
    expect(await remaining('tb')).toBe(100);
    // Refilled to capacity meanwhile: nothing to give back beyond a full bucket.
    expect((await settle('tb', 0)).limits[0]!.remaining).toBe(100);
    expect((await f.tokenBucket('rl:v1:tb:tenant:{acme}'))?.tokens, 'the stored balance too').toBe(100);
    await spend('tb', 100);
    expect((await engine.allow({ policy: 'tb', identity: acme, cost: 1, requestId: '' })).allowed).toBe(false);
  });

  it("fixed window: the refund goes to the reservation's window; others' spend in a later window stays", async () => {
    await reserve('fw', 40);
    await spend('fw', 30);
    expect((await settle('fw', 10)).limits[0]!.remaining).toBe(100 - 30 - 10);

    await f.reset();
    await reserve('fw', 40);
    f.clock.set(T0 + MINUTE);
    await spend('fw', 30);
    // The reservation's window is over: its 40 are not taken off the next window's 30.
    expect((await settle('fw', 0)).limits[0]!.remaining).toBe(70);
    expect(await f.counter('rl:v1:fw:tenant:{acme}:minute')).toBe(30);
  });

  it("sliding window log: the refund removes the reservation's own entries, never later ones", async () => {
    await reserve('swl', 4);
    f.clock.advance(30_000);
    await spend('swl', 5);
    expect(await remaining('swl')).toBe(1);
    f.clock.advance(1_000);
    expect((await settle('swl', 0)).limits[0]!.remaining).toBe(5);
    expect(await f.logSize('rl:v1:swl:tenant:{acme}')).toBe(5);
    // The others' 5 count until a minute after they were spent, and not after.
    f.clock.set(T0 + 30_000 + MINUTE - 1);
    expect(await remaining('swl')).toBe(5);
    f.clock.set(T0 + 30_000 + MINUTE);
    expect(await remaining('swl')).toBe(10);
  });
});
