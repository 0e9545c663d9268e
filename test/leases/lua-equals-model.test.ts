import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DecideMode, identityKey, leaseMember, type LimitCall } from '@quota-service/core';
import { clusterFixture, limitFrom, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';
import { decideGroup } from '../support/store-calls.js';

/**
 * Concurrency leases, one algorithm with two bodies: the Lua function on a
 * single Redis node and on a 3+3 Redis Cluster (time injected) and the
 * TypeScript model (virtual clock) see the same random sequence of
 * acquisitions, releases, renewals and peeks and must answer the same
 * (allowed/held, retry, remaining, reset); and on every store, at every step,
 * no lease set holds more than `limit` live leases.
 *
 * Leases here live 10 s or more, so Redis's own expiry of a set (real time)
 * never lapses within a sequence; expiry on virtual time is what is tested.
 * A set outlives its last lease (so that its expired leases are counted), so
 * its expiry matters to the answers: after each step every Redis set's TTL
 * must be the model's (less the real time since it was set), and a set the
 * model has expired on virtual time is deleted from Redis, as Redis would
 * delete it at that time.
 */
const IDENTITIES = ['a', 'b', 'c', 'a:b', '{x}'];
const REQUEST_IDS = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r:7'];
const OPS = ['acquire', 'acquire', 'acquire', 'release', 'renew', 'peek'] as const;

const timeStep = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 600_000 }));
const step = fc.record({ dt: timeStep, op: fc.constantFrom(...OPS), who: fc.constantFrom(...IDENTITIES), rid: fc.constantFrom(...REQUEST_IDS) });
const parameters = fc.record({ limit: fc.integer({ min: 1, max: 4 }), ttl: fc.integer({ min: 10_000, max: 600_000 }) });

const MODE: Record<(typeof OPS)[number], DecideMode> = { acquire: 'spend', release: 'release', renew: 'renew', peek: 'peek' };

describe('concurrency: Lua = model, single node and cluster; never more than limit held', () => {
  const redis = useRedisServer();
  const cluster = useRedisCluster();
  let fixtures: StoreFixture[];
  /** Raw clients beside the two Redis fixtures, to count live leases where they are stored. */
  let raw: Redis[];
  beforeAll(async () => {
    fixtures = [memoryFixture(), redisFixture(redis()), clusterFixture(cluster())];
    await fixtures[2]!.store.ready();
    raw = [redis().client(), cluster().client() as unknown as Redis];
  });
  afterAll(async () => {
    await Promise.all(raw.map((client) => client.quit()));
    await Promise.all(fixtures.slice(1).map((f) => f.store.close()));
  });

  it('same answers on all three for random sequences; held <= limit at every step', async () => {
    await fc.assert(
      fc.asyncProperty(parameters, fc.integer({ min: 0, max: 4_102_444_800_000 }), fc.array(step, { minLength: 1, maxLength: 40 }), async (p, start, steps) => {
        const limit = limitFrom({ name: 'jobs', key_by: 'user', algorithm: 'concurrency', limit: p.limit, lease_ttl_ms: p.ttl });
        await Promise.all(fixtures.map((f) => f.reset()));
        let now = start;
        /** Per set: when the model expires it (virtual time), as of the last step. */
        const expiries = new Map<string, number | undefined>();
        for (const [i, { dt, op, who, rid }] of steps.entries()) {
          now += dt;
          for (const f of fixtures) f.clock.set(now);
          const key = identityKey('jobs', 'user', who);
          if ((await fixtures[0]!.ttl(key)) === undefined) for (const client of raw) await client.del(key);
          const call: LimitCall = { limit, identityKey: key, cost: op === 'peek' ? 0 : 1, lease: leaseMember(`user=${who}`, rid) };
          const [model, ...others] = await Promise.all(fixtures.map((f) => decideGroup(f.store, [call], MODE[op])));
          const context = `step ${i}: ${JSON.stringify({ dt, op, who, rid, ...p })}`;
          others.forEach((answer, j) => expect(answer, `${context} on ${fixtures[j + 1]!.name}`).toEqual(model));
          const ttl = await fixtures[0]!.ttl(key);
          const expiry = ttl === undefined ? undefined : now + ttl;
          for (const f of fixtures.slice(1)) {
            const redisTtl = await f.ttl(key);
            if (ttl === undefined) expect(redisTtl, `no set on ${f.name}, ${context}`).toBeUndefined();
            // Set by this step (the model's expiry moved): Redis's, less the real time since.
            else if (expiry !== expiries.get(key))
              expect(ttl - (redisTtl ?? Number.NaN), `the set's TTL on ${f.name}, ${context}`).toSatisfy((d: number) => d >= 0 && d < 5_000);
          }
          expiries.set(key, expiry);
          for (const client of raw) expect(await client.zcount(key, `(${now}`, '+inf'), `live leases of ${who}, ${context}`).toBeLessThanOrEqual(p.limit);
          expect(model!.outcomes[0]!.remaining, `remaining = limit - held >= 0, ${context}`).toBeGreaterThanOrEqual(0);
        }
      }),
      { numRuns: 120 },
    );
  });

  it('a refund removes the lease its acquisition added, and not one a retry found held', async () => {
    const limit = limitFrom({ name: 'jobs', key_by: 'user', algorithm: 'concurrency', limit: 2, lease_ttl_ms: 60_000 });
    for (const f of fixtures) {
      await f.reset();
      const call: LimitCall = { limit, identityKey: identityKey('jobs', 'user', 'a'), cost: 1, lease: leaseMember('user=a', 'r1') };
      const first = await decideGroup(f.store, [call], 'spend');
      expect(first.outcomes[0], f.name).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 60_000 });
      f.clock.advance(1_000);
      // A retry finds its lease held: allowed, expiring when the first acquisition said, nothing added.
      const retry = await decideGroup(f.store, [call], 'spend');
      expect(retry.outcomes[0], f.name).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 59_000 });
      await decideGroup(f.store, [call], 'refund', { spentAtMs: retry.nowMs });
      expect((await decideGroup(f.store, [{ ...call, cost: 0 }], 'peek')).outcomes[0]!.remaining, `${f.name}: still held`).toBe(1);
      await decideGroup(f.store, [call], 'refund', { spentAtMs: first.nowMs });
      expect((await decideGroup(f.store, [{ ...call, cost: 0 }], 'peek')).outcomes[0]!.remaining, `${f.name}: refunded`).toBe(2);
      expect(await f.keys(), `${f.name}: the empty set is gone`).toEqual([]);
    }
  });
});
