import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies, type VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { LeaseMetrics } from '../../src/metrics/lease-metrics.js';
import type { QuotaStore } from '../../src/store/store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { memoryFixture, redisFixture } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * quota_leases_expired_total counts, from the store's answers, the leases
 * that expired without a release, once each, on whichever replica's call
 * dropped them; quota_leases_held is a replica's latest reading of each
 * identity's lease set, for at most lease_ttl_ms.
 */
const TTL = 1_000;
const policies = parsePolicies(
  stringify({
    policies: { jobs: { limits: [{ name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 3, lease_ttl_ms: TTL }] } },
  }),
);
const lease = (requestId: string, tenant = 'acme') => ({ policy: 'jobs', identity: { tenant }, requestId });

/** A service replica: an engine on `store` with its own lease metrics. */
function replica(store: QuotaStore, clock: VirtualClock): { engine: QuotaEngine; metric: (name: 'held' | 'expired') => Promise<number> } {
  const registry = new Registry();
  const engine = new QuotaEngine(policies, store, { leaseEvents: new LeaseMetrics(registry, clock) });
  const metric = async (name: 'held' | 'expired') => {
    const full = name === 'held' ? 'quota_leases_held' : 'quota_leases_expired_total';
    const values = (await registry.getSingleMetric(full)?.get())?.values ?? [];
    return values.find((v) => v.labels.policy === 'jobs')?.value ?? 0;
  };
  return { engine, metric };
}

describe('lease metrics', () => {
  it('one replica: held as the store reports it; a lease left to expire is counted once, when a later call drops it', async () => {
    const f = memoryFixture();
    const { engine, metric } = replica(f.store, f.clock);
    for (const id of ['a', 'b', 'c', 'd']) await engine.allow({ ...lease(id), cost: 1 });
    expect([await metric('held'), await metric('expired')]).toEqual([3, 0]);
    await engine.leases.release(lease('a'));
    await engine.leases.release(lease('a'));
    f.clock.advance(600);
    await engine.leases.renew(lease('b'));
    expect([await metric('held'), await metric('expired')]).toEqual([2, 0]);

    // c was neither renewed nor released: it expires, and the next lease call of acme drops and counts it.
    f.clock.advance(400);
    expect((await engine.getQuota({ policy: 'jobs', identity: { tenant: 'acme' } }))[0]?.leasesHeld).toBe(1);
    expect([await metric('held'), await metric('expired')]).toEqual([1, 0]);
    await engine.allow({ ...lease('e'), cost: 1 });
    expect([await metric('held'), await metric('expired')]).toEqual([2, 1]);
    await engine.allow({ ...lease('f'), cost: 1 });
    await engine.leases.release(lease('c'));
    expect([await metric('held'), await metric('expired')]).toEqual([3, 1]);

    // The last leases of a set expire too: the set outlives them by lease_ttl_ms, so a call within that finds them.
    f.clock.advance(2 * TTL);
    expect(await metric('held')).toBe(0);
    expect((await engine.allow({ ...lease('g'), cost: 1 })).allowed).toBe(true);
    expect(await metric('expired')).toBe(4);
  });

  describe('two replicas on one Redis', () => {
    const redis = useRedisServer();

    it('a lease released through the other replica is not expired; one left to expire counts once over both', async () => {
      const f = redisFixture(redis());
      await f.reset();
      const other = new RedisStore(redis().client(), { clock: f.clock });
      try {
        const a = replica(f.store, f.clock);
        const b = replica(other, f.clock);
        const expired = async () => [await a.metric('expired'), await b.metric('expired')];

        // Acquired through A, released through B.
        expect((await a.engine.allow({ ...lease('r1'), cost: 1 })).allowed).toBe(true);
        expect((await b.engine.leases.release(lease('r1'))).released).toBe(true);
        f.clock.advance(TTL + 1);
        await a.engine.allow({ ...lease('r2'), cost: 1 });
        await b.engine.getQuota({ policy: 'jobs', identity: { tenant: 'acme' } });
        expect(await expired()).toEqual([0, 0]);

        // r2 is left to expire: the next call, through B, drops and counts it; no later call counts it again.
        f.clock.advance(TTL);
        expect(await a.metric('held')).toBe(0);
        await b.engine.allow({ ...lease('r3'), cost: 1 });
        expect(await expired()).toEqual([0, 1]);
        await a.engine.allow({ ...lease('r4'), cost: 1 });
        expect((await a.engine.leases.release(lease('r2'))).released).toBe(false);
        await b.engine.leases.renew(lease('r3'));
        expect(await expired()).toEqual([0, 1]);

        // A late release of a lease that expired and is still in the set drops it, with r3 (expired too): counted there, once.
        f.clock.advance(TTL + 1);
        expect((await a.engine.leases.release(lease('r4'))).released).toBe(false);
        await b.engine.allow({ ...lease('r5'), cost: 1 });
        expect(await expired()).toEqual([2, 1]);
        // Held, as each replica last read acme's set: r5 through B.
        expect(await b.metric('held')).toBe(1);
      } finally {
        await other.close();
        await f.store.close();
      }
    });
  });
});
