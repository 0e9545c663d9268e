import calculateSlot from 'cluster-key-slot';
import { beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fixedWindowKey } from '../../clients/core/src/algorithms/fixed-window/model.js';
import { identityKey, parsePolicies, requestKey } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useClusterFixture, useRedisServer } from '../support/use-redis.js';

/**
 * Idempotent Allow (DESIGN.md AllowRequest.request_id): a retry with the same
 * request_id within the policy's request_id_ttl_ms gets the first decision
 * again and spends nothing more. The check and the spend are one script call,
 * so concurrent retries cannot both spend.
 */
const bucket = { name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 };
const policies = parsePolicies(
  stringify({
    policies: {
      orders: { request_id_ttl_ms: 5_000, limits: [bucket] },
      'orders.create': {
        limits: [
          bucket,
          { name: 'user-per-minute', key_by: 'user', algorithm: 'fixed_window', limit: 120, window: 'minute' },
          { name: 'tenant-per-minute', key_by: 'tenant', algorithm: 'fixed_window', limit: 2000, window: 'minute' },
        ],
      },
    },
  }),
);
const bucketKey = (user: string) => identityKey('orders', 'user', user);
const tenantCounterKey = (tenant: string) => fixedWindowKey(identityKey('tenant-per-minute', 'tenant', tenant), 'minute');

/** `expire` makes a key lapse: virtual time on the memory store; DEL on Redis, which expires on its own clock. */
function scenarios(fixture: () => StoreFixture, expire: (key: string) => Promise<void>) {
  const allow = (engine: QuotaEngine, policy: string, requestId: string, user = '42', tenant = 'acme') =>
    engine.allow({ policy, identity: { user, tenant }, cost: 1, requestId });

  it('20 concurrent retries with one request_id spend one token and all get the first decision; another id spends again', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    const decisions = await Promise.all(Array.from({ length: 20 }, () => allow(engine, 'orders', 'req-1')));
    expect(new Set(decisions.map((d) => JSON.stringify(d))).size).toBe(1);
    expect(decisions[0]).toMatchObject({ allowed: true, limits: [{ name: 'orders', remaining: 9 }] });
    expect((await f.tokenBucket(bucketKey('42')))?.tokens).toBe(9);
    // The remembered decision sits beside the identity's keys (same slot) and expires.
    const memo = requestKey('orders', 'user', '42', 'user=42', 'req-1');
    expect(calculateSlot(memo)).toBe(calculateSlot(bucketKey('42')));
    expect(await f.ttl(memo)).toBeGreaterThan(0);
    expect(await f.ttl(memo)).toBeLessThanOrEqual(5_000);

    expect((await allow(engine, 'orders', 'req-2')).limits[0]?.remaining).toBe(8);
    expect((await f.tokenBucket(bucketKey('42')))?.tokens).toBe(8);
    // The same id for another identity is another request.
    expect((await allow(engine, 'orders', 'req-1', '43')).limits[0]?.remaining).toBe(9);
    // Without an id every call spends.
    expect((await allow(engine, 'orders', '')).limits[0]?.remaining).toBe(7);
  });

  it('a rejected decision is remembered too: the retry is rejected again even after tokens came back', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    for (let i = 0; i < 10; i++) await allow(engine, 'orders', '');
    const first = await allow(engine, 'orders', 'late');
    expect(first.allowed).toBe(false);
    f.clock.advance(1_000);
    expect(await allow(engine, 'orders', 'late')).toEqual(first);
    expect((await allow(engine, 'orders', 'fresh')).allowed).toBe(true);
  });

  it('after request_id_ttl_ms the id is forgotten and a retry is decided anew', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    await allow(engine, 'orders', 'r');
    const memo = requestKey('orders', 'user', '42', 'user=42', 'r');
    await expire(memo);
    expect((await allow(engine, 'orders', 'r')).limits[0]?.remaining).toBeLessThan(9.5);
    expect((await f.tokenBucket(bucketKey('42')))?.tokens).toBeLessThan(9.5);
  });

  it('a multi-limit policy: 20 concurrent retries spend once on every limit (user and tenant, cross-slot on a cluster)', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    const decisions = await Promise.all(Array.from({ length: 20 }, () => allow(engine, 'orders.create', 'po-1001')));
    expect(new Set(decisions.map((d) => JSON.stringify(d))).size).toBe(1);
    expect(decisions[0]!.limits.map((l) => l.remaining)).toEqual([9, 119, 1999]);
    expect((await f.tokenBucket(bucketKey('42')))?.tokens).toBe(9);
    expect(await f.counter(tenantCounterKey('acme'))).toBe(1);
    expect((await allow(engine, 'orders.create', 'po-1002')).limits.map((l) => l.remaining)).toEqual([8, 118, 1998]);
  });

  it('a request id belongs to the whole identity: the same id for the same user under another tenant is a new request', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    const first = await allow(engine, 'orders.create', 'po-7', 'u', 'tenant-a');
    expect(first.limits.map((l) => l.remaining)).toEqual([9, 119, 1999]);
    // Same user, same id, another tenant: decided and charged anew, to tenant b's limit too.
    const other = await allow(engine, 'orders.create', 'po-7', 'u', 'tenant-b');
    expect(other.limits.map((l) => l.remaining)).toEqual([8, 118, 1999]);
    expect(await f.counter(tenantCounterKey('tenant-b'))).toBe(1);
    expect(await f.counter(tenantCounterKey('tenant-a'))).toBe(1);
    // A retry with the first identity still replays the first decision.
    expect(await allow(engine, 'orders.create', 'po-7', 'u', 'tenant-a')).toEqual(first);
    expect((await f.tokenBucket(bucketKey('u')))?.tokens).toBe(8);
  });
}

describe('idempotent Allow, memory and single node', () => {
  const redis = useRedisServer();
  const made: Record<string, StoreFixture> = {};
  for (const [name, make, expire] of [
    ['memory', () => memoryFixture(), async () => made.memory!.clock.advance(5_001)],
    ['redis', () => redisFixture(redis()), async (key: string) => void (await redis().client().del(key))],
  ] as const) {
    describe(name, () => {
      beforeEach(async () => {
        made[name] ??= make();
        await made[name].reset();
      });
      scenarios(() => made[name]!, expire);
    });
  }
});

describe('idempotent Allow, Redis Cluster', () => {
  const { cluster, fixture } = useClusterFixture();
  it('user 42 and tenant acme live in different slots', () => {
    expect(calculateSlot(bucketKey('42'))).not.toBe(calculateSlot(tenantCounterKey('acme')));
  });
  scenarios(fixture, async (key) => void (await cluster().client().del(key)));
});
