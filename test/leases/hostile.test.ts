import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { createLogger } from '../../src/logger.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * One identity sends 10,000 distinct request ids: it gets `limit` leases, the
 * rest are denied, the lease set never holds more than `limit` members, and
 * every key it made expires within the policy's TTLs (request_id_ttl_ms; the
 * lease set one lease_ttl_ms after its last lease, so that the leases that
 * expired unreleased are there to count), so its memory is bounded by them.
 * On Redis the keys expire on Redis's own clock, so the test waits them out.
 */
/** Long enough that no key lapses on Redis's real clock while the 10,000 decisions are made. */
const TTL_MS = 6_000;

const policies = parsePolicies(
  stringify({
    policies: {
      jobs: {
        failure_mode: 'fail_closed',
        request_id_ttl_ms: TTL_MS,
        limits: [{ name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 5, lease_ttl_ms: TTL_MS }],
      },
    },
  }),
);

describe.each(['memory', 'redis'] as const)('10,000 request ids from one identity on %s', (kind) => {
  const redis = useRedisServer();
  let fixture: StoreFixture;
  let engine: QuotaEngine;
  beforeAll(() => {
    fixture = kind === 'memory' ? memoryFixture() : redisFixture(redis());
    // A generous budget: a decision the store answers late must not go to the failure mode.
    const failure = new StoreFailurePolicy({ timeoutMs: 20_000, breakerFailures: 1_000, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
    engine = new QuotaEngine(policies, fixture.store, { failure });
  });
  afterAll(async () => {
    await fixture.store.close();
  });

  it('gets limit leases, and leaves nothing once the TTLs have passed', async () => {
    let allowed = 0;
    for (let chunk = 0; chunk < 10; chunk++) {
      const answers = await Promise.all(
        Array.from({ length: 1_000 }, (_, i) => engine.allow({ policy: 'jobs', identity: { tenant: 'greedy' }, cost: 1, requestId: `id-${chunk}-${i}` })),
      );
      allowed += answers.filter((a) => a.allowed).length;
    }
    expect(allowed).toBe(5);
    const leaseSet = 'rl:v1:jobs-in-flight:tenant:{greedy}';
    expect(await fixture.logSize(leaseSet), 'members of the lease set').toBe(5);
    const keys = await fixture.keys();
    // The lease set and one remembered decision per request id, each with its expiry.
    expect(keys).toHaveLength(10_001);
    for (const key of [leaseSet, keys[0]!, keys[5_000]!]) {
      const ttl = await fixture.ttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(key === leaseSet ? 2 * TTL_MS : TTL_MS);
    }
    // A denied request id holds nothing to release.
    expect((await engine.leases.release({ policy: 'jobs', identity: { tenant: 'greedy' }, requestId: 'id-9-999' })).released).toBe(false);

    fixture.clock.advance(TTL_MS + 1);
    if (kind === 'redis') await new Promise((resolve) => setTimeout(resolve, TTL_MS + 100));
    expect(await fixture.keys(), 'every remembered decision expired with its TTL; the lease set holds its expired leases').toEqual([leaseSet]);
    fixture.clock.advance(TTL_MS);
    if (kind === 'redis') await new Promise((resolve) => setTimeout(resolve, TTL_MS + 100));
    expect(await fixture.keys(), 'every key expired with its TTL').toEqual([]);
    expect((await engine.allow({ policy: 'jobs', identity: { tenant: 'greedy' }, cost: 1, requestId: 'later' })).allowed).toBe(true);
  }, 60_000);
});
