import calculateSlot from 'cluster-key-slot';
import { beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fixedWindowKey } from '../../clients/core/src/algorithms/fixed-window/model.js';
import { identityKey, parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useClusterFixture, useRedisServer } from '../support/use-redis.js';

/**
 * A request that one limit rejects spends on none of the others.
 * The shipped orders.create shape (user bucket + user per minute + tenant per
 * minute) with small numbers. On the memory store and a single Redis node the
 * whole policy is one call; on the cluster the user's keys and the tenant's
 * live in different slots, so the engine reserves slot by slot and refunds.
 * Both slot orders are run there, so the refund path is exercised whichever
 * limit rejects.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      'orders.create': {
        limits: [
          { name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 },
          { name: 'user-per-minute', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' },
          { name: 'tenant-per-minute', key_by: 'tenant', algorithm: 'fixed_window', limit: 4, window: 'minute' },
        ],
      },
    },
  }),
);
const bucketKey = (user: string) => identityKey('orders', 'user', user);
const userCounterKey = (user: string) => fixedWindowKey(identityKey('user-per-minute', 'user', user), 'minute');
const tenantCounterKey = (tenant: string) => fixedWindowKey(identityKey('tenant-per-minute', 'tenant', tenant), 'minute');

/** Identities whose user keys hash to a lower (or higher) slot than their tenant's keys. */
function pair(userFirst: boolean): { user: string; other: string; tenant: string } {
  const tenant = 'acme';
  const tenantSlot = calculateSlot(tenantCounterKey(tenant));
  const users = Array.from({ length: 200 }, (_, i) => `u${i}`).filter((u) => calculateSlot(bucketKey(u)) < tenantSlot === userFirst);
  return { user: users[0]!, other: users[1]!, tenant };
}

function scenarios(fixture: () => StoreFixture, label: string, ids: { user: string; other: string; tenant: string }) {
  const allow = (engine: QuotaEngine, user: string) =>
    engine.allow({ policy: 'orders.create', identity: { user, tenant: ids.tenant }, cost: 1, requestId: '' });

  it(`${label}: tenant exhausted -> rejected by the tenant limit; the user's bucket and per-minute counter are unchanged`, async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    // Another user of the tenant, and this user once, use up the tenant's 4.
    for (let i = 0; i < 3; i++) expect((await allow(engine, ids.other)).allowed).toBe(true);
    expect((await allow(engine, ids.user)).allowed).toBe(true);
    const bucketBefore = await f.tokenBucket(bucketKey(ids.user));
    const counterBefore = await f.counter(userCounterKey(ids.user));
    expect([bucketBefore?.tokens, counterBefore]).toEqual([9, 1]);

    const decision = await allow(engine, ids.user);
    expect(decision.allowed).toBe(false);
    expect(decision.deniedBy).toBe('tenant-per-minute');
    expect(decision.retryAfterMs).toBeGreaterThan(0);
    expect(decision.limits.map((l) => [l.name, l.remaining])).toEqual([
      ['orders', 9],
      ['user-per-minute', 2],
      ['tenant-per-minute', 0],
    ]);
    expect(await f.tokenBucket(bucketKey(ids.user))).toEqual(bucketBefore);
    expect(await f.counter(userCounterKey(ids.user))).toBe(counterBefore);
    expect(await f.counter(tenantCounterKey(ids.tenant))).toBe(4);
  });

  it(`${label}: user limit exhausted -> rejected by it; the tenant counter and the user's bucket are unchanged`, async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    for (let i = 0; i < 3; i++) expect((await allow(engine, ids.user)).allowed).toBe(true);
    const tenantBefore = await f.counter(tenantCounterKey(ids.tenant));
    const bucketBefore = await f.tokenBucket(bucketKey(ids.user));
    expect([tenantBefore, bucketBefore?.tokens]).toEqual([3, 7]);

    const decision = await allow(engine, ids.user);
    expect(decision.allowed).toBe(false);
    expect(decision.deniedBy).toBe('user-per-minute');
    expect(decision.limits.map((l) => [l.name, l.remaining])).toEqual([
      ['orders', 7],
      ['user-per-minute', 0],
      ['tenant-per-minute', 1],
    ]);
    expect(await f.counter(tenantCounterKey(ids.tenant))).toBe(tenantBefore);
    expect(await f.tokenBucket(bucketKey(ids.user))).toEqual(bucketBefore);
    // The tenant's last unit is still there for another user.
    expect((await allow(engine, ids.other)).allowed).toBe(true);
    expect(await f.counter(tenantCounterKey(ids.tenant))).toBe(4);
  });

  it(`${label}: GetQuota reports every limit without spending`, async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    await allow(engine, ids.user);
    const keys = await f.keys();
    const limits = await engine.getQuota({ policy: 'orders.create', identity: { user: ids.user, tenant: ids.tenant } });
    expect(limits.map((l) => [l.name, l.remaining])).toEqual([
      ['orders', 9],
      ['user-per-minute', 2],
      ['tenant-per-minute', 3],
    ]);
    expect(await f.keys()).toEqual(keys);
  });
}

describe('all-or-nothing, same slot: one call decides the whole policy', () => {
  const redis = useRedisServer();
  let memory: StoreFixture;
  let single: StoreFixture;
  beforeEach(async () => {
    memory ??= memoryFixture();
    single ??= redisFixture(redis());
    await Promise.all([memory.reset(), single.reset()]);
  });
  scenarios(() => memory, 'memory', pair(true));
  scenarios(() => single, 'redis', pair(true));
});

describe('all-or-nothing, cross slot (Redis Cluster): reserve in slot order, refund on a later rejection', () => {
  const { fixture } = useClusterFixture();

  it('the layouts really span two slots, in both orders', () => {
    for (const userFirst of [true, false]) {
      const { user, tenant } = pair(userFirst);
      expect(calculateSlot(bucketKey(user))).toBe(calculateSlot(userCounterKey(user)));
      expect(calculateSlot(bucketKey(user)) < calculateSlot(tenantCounterKey(tenant))).toBe(userFirst);
    }
  });
  scenarios(fixture, 'cluster, user slot first', pair(true));
  scenarios(fixture, 'cluster, tenant slot first', pair(false));
});
