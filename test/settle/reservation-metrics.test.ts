import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies, type VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { QuotaMetrics } from '../../src/metrics/metrics.js';
import type { QuotaStore } from '../../src/store/store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { memoryFixture, redisFixture } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * quota_reservations_total counts only what a Settle can move, and
 * quota_reservations_outstanding, summed over replicas, is the reservations
 * neither settled nor expired, also when a reservation is settled through
 * another replica than the one that made it.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      llm: { request_id_ttl_ms: 60_000, limits: [{ name: 'tokens', key_by: 'tenant', algorithm: 'token_bucket', capacity: 1_000, refill_per_second: 1 }] },
      jobs: { request_id_ttl_ms: 60_000, limits: [{ name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 5, lease_ttl_ms: 30_000 }] },
      mixed: {
        request_id_ttl_ms: 60_000,
        limits: [
          { name: 'mixed-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 5, lease_ttl_ms: 30_000 },
          { name: 'mixed-rate', key_by: 'tenant', algorithm: 'fixed_window', limit: 100, window: 'hour' },
        ],
      },
    },
  }),
);
const acme = { tenant: 'acme' };

/** A service replica: an engine on `store`, with its own metrics. */
function replica(store: QuotaStore, clock: VirtualClock): { engine: QuotaEngine; metrics: QuotaMetrics } {
  const metrics = new QuotaMetrics(clock);
  const engine = new QuotaEngine(policies, store, {
    onReserve: (policy, ttlMs) => metrics.reserved(policy, ttlMs),
    onSettle: (policy, event, reservation) => metrics.settled(policy, event, reservation),
  });
  return { engine, metrics };
}

async function value(metrics: QuotaMetrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return metric?.value ?? 0;
}

describe('reservation metrics', () => {
  it('count reservations only where a Settle moves units; outstanding drops on settlement and on expiry', async () => {
    const f = memoryFixture();
    const { engine, metrics } = replica(f.store, f.clock);
    const outstanding = (policy = 'llm') => value(metrics, 'quota_reservations_outstanding', { policy });
    const total = (policy = 'llm') => value(metrics, 'quota_reservations_total', { policy });

    for (const id of ['a', 'b', 'c']) expect((await engine.allow({ policy: 'llm', identity: acme, cost: 10, requestId: id })).allowed).toBe(true);
    // A retry of one (a replay), and an Allow without request_id: no reservation.
    await engine.allow({ policy: 'llm', identity: acme, cost: 10, requestId: 'a' });
    await engine.allow({ policy: 'llm', identity: acme, cost: 10, requestId: '' });
    // A lease only: nothing a Settle could move. A lease with a rate limit: a reservation.
    await engine.allow({ policy: 'jobs', identity: acme, cost: 1, requestId: 'j1' });
    await engine.allow({ policy: 'mixed', identity: acme, cost: 3, requestId: 'm1' });
    expect([await total(), await outstanding(), await total('jobs'), await total('mixed'), await outstanding('mixed')]).toEqual([3, 3, 0, 1, 1]);

    await engine.settle({ policy: 'llm', identity: acme, requestId: 'a', actualCost: 4 });
    await engine.settle({ policy: 'llm', identity: acme, requestId: 'a', actualCost: 4 });
    await engine.settle({ policy: 'jobs', identity: acme, requestId: 'j1', actualCost: 1 });
    expect(await outstanding()).toBe(2);
    expect(await value(metrics, 'quota_settlements_total', { policy: 'llm', result: 'settled' })).toBe(1);
    expect(await value(metrics, 'quota_settlements_total', { policy: 'llm', result: 'already_settled' })).toBe(1);
    expect(await value(metrics, 'quota_settled_units_total', { policy: 'llm', direction: 'refunded' })).toBe(6);
    expect(await value(metrics, 'quota_reservations_outstanding', { policy: 'jobs' })).toBe(0);

    // b and c expire unsettled with their records: no longer outstanding, still counted as made.
    // (Counted per second of expiry: gone within a second after the record.)
    f.clock.advance(59_999);
    expect(await outstanding()).toBe(2);
    f.clock.advance(1_001);
    expect([await outstanding(), await total(), await outstanding('mixed')]).toEqual([0, 3, 0]);
    await expect(engine.settle({ policy: 'llm', identity: acme, requestId: 'b', actualCost: 1 })).rejects.toThrow(/NOT_FOUND|no reservation/);
    expect(await outstanding()).toBe(0);
  });

  describe('two replicas on one Redis', () => {
    const redis = useRedisServer();

    it('a reservation made through one replica and settled through the other is outstanding in the sum, then not', async () => {
      const f = redisFixture(redis());
      await f.reset();
      const other = new RedisStore(redis().client(), { clock: f.clock });
      try {
        const a = replica(f.store, f.clock);
        const b = replica(other, f.clock);
        const sum = async () =>
          (await value(a.metrics, 'quota_reservations_outstanding', { policy: 'llm' })) +
          (await value(b.metrics, 'quota_reservations_outstanding', { policy: 'llm' }));
        await a.engine.allow({ policy: 'llm', identity: acme, cost: 10, requestId: 'r1' });
        await a.engine.allow({ policy: 'llm', identity: acme, cost: 10, requestId: 'r2' });
        expect(await sum()).toBe(2);
        await b.engine.settle({ policy: 'llm', identity: acme, requestId: 'r1', actualCost: 2 });
        expect(await sum()).toBe(1);
        // Each replica's own figure: what it reserved minus what it settled.
        expect(await value(b.metrics, 'quota_reservations_outstanding', { policy: 'llm' })).toBe(-1);
        f.clock.advance(59_999);
        expect(await sum()).toBe(1);
        f.clock.advance(1_001);
        expect(await sum()).toBe(0);
        expect(await value(a.metrics, 'quota_reservations_outstanding', { policy: 'llm' })).toBe(0);
      } finally {
        await other.close();
        await f.store.close();
      }
    });
  });
});
