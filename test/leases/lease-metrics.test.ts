import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { LeaseMetrics } from '../../src/metrics/lease-metrics.js';
import { MemoryStore } from '../../src/store/memory.js';
import { T0 } from '../support/store-fixtures.js';

/**
 * quota_leases_held and quota_leases_expired_total as a replica reports
 * them: moved by the leases it granted, renewed and released, and by the
 * expiry of those it granted (a holder that crashed).
 */
const policies = parsePolicies(
  stringify({ policies: { jobs: { limits: [{ name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 3, lease_ttl_ms: 1_000 }] } } }),
);

async function scrape(registry: Registry): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values) out[`${metric.name}{${Object.values(value.labels).join(',')}}`] = value.value;
  }
  return out;
}

describe('lease metrics', () => {
  it('count leases held and leases that expired without a release, per policy', async () => {
    const clock = new VirtualClock(T0);
    const registry = new Registry();
    const engine = new QuotaEngine(policies, new MemoryStore(clock), { leaseEvents: new LeaseMetrics(registry, clock) });
    const lease = (requestId: string) => ({ policy: 'jobs', identity: { tenant: 'acme' }, requestId });
    for (const id of ['a', 'b', 'c', 'd']) await engine.allow({ ...lease(id), cost: 1 });
    expect(await scrape(registry)).toMatchObject({ 'quota_leases_held{jobs}': 3, 'quota_leases_expired_total{jobs}': 0 });

    await engine.leases.release(lease('a'));
    await engine.leases.release(lease('a'));
    clock.advance(600);
    await engine.leases.renew(lease('b'));
    expect(await scrape(registry)).toMatchObject({ 'quota_leases_held{jobs}': 2, 'quota_leases_expired_total{jobs}': 0 });

    // c was neither renewed nor released: it expires; b, renewed, is still held.
    clock.advance(400);
    expect(await scrape(registry)).toMatchObject({ 'quota_leases_held{jobs}': 1, 'quota_leases_expired_total{jobs}': 1 });
    clock.advance(600);
    expect(await scrape(registry)).toMatchObject({ 'quota_leases_held{jobs}': 0, 'quota_leases_expired_total{jobs}': 2 });
  });
});
