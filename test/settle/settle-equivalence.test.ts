import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { identityKey, parsePolicies, type PolicySet } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { clusterFixture, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';
import { decideAll } from '../support/store-calls.js';

/**
 * Settle and charge, Lua = model: the same random sequence of Allows (with
 * and without request ids), settlements (of reservations made, of unknown
 * ids, with actual costs below, at and above the estimate, up to far past the
 * capacity) and charges, on virtual time, must give the same answers and the
 * same statuses on the embedded store (the TypeScript models), a single Redis
 * node and a 3+3 Redis Cluster (where the multi-limit policy spans slots and
 * settles in two steps). One policy per algorithm, and the orders.create shape.
 */
const ALGORITHMS: Record<string, Record<string, unknown>> = {
  tb: { algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 },
  gcra: { algorithm: 'gcra', capacity: 10, refill_per_second: 2 },
  fw: { algorithm: 'fixed_window', limit: 8, window: 'minute' },
  swl: { algorithm: 'sliding_window_log', limit: 8, window: 'minute' },
  swc: { algorithm: 'sliding_window_counter', limit: 8, window: 'minute' },
  'lb-police': { algorithm: 'leaky_bucket', capacity: 8, leak_per_second: 0.5, mode: 'policing' },
  'lb-shape': { algorithm: 'leaky_bucket', capacity: 8, leak_per_second: 0.5, mode: 'shaping' },
};
const POLICIES: PolicySet = parsePolicies(
  stringify({
    policies: {
      ...Object.fromEntries(
        Object.entries(ALGORITHMS).map(([name, definition]) => [name, { request_id_ttl_ms: 86_400_000, limits: [{ name, key_by: 'user', ...definition }] }]),
      ),
      multi: {
        request_id_ttl_ms: 86_400_000,
        limits: [
          { name: 'm-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1.953125 },
          { name: 'm-user', key_by: 'user', algorithm: 'fixed_window', limit: 6, window: 'minute' },
          { name: 'm-tenant', key_by: 'tenant', algorithm: 'sliding_window_log', limit: 12, window: 'minute' },
        ],
      },
    },
  }),
);

/** a, b and c hash to three different masters. */
const USERS = ['a', 'b', 'c'];
const op = fc.oneof(
  fc.record({ kind: fc.constant('allow' as const), cost: fc.integer({ min: 1, max: 6 }), id: fc.boolean() }),
  fc.record({ kind: fc.constant('settle' as const), actual: fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constantFrom(0, 40, 1e15)), known: fc.boolean() }),
  fc.record({ kind: fc.constant('charge' as const), cost: fc.integer({ min: 1, max: 12 }) }),
);
const step = fc.record({
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 600_000 })),
  user: fc.constantFrom(...USERS),
  tenant: fc.constantFrom('a', 't1'),
  op,
});
type Step = typeof step extends fc.Arbitrary<infer T> ? T : never;

/** An error as the caller sees it: its class and message. */
const asAnswer = (error: unknown) => ({ error: (error as Error).name, message: (error as Error).message });

describe('settle and charge: model = single node = cluster', () => {
  const redis = useRedisServer();
  const cluster = useRedisCluster();
  let fixtures: StoreFixture[];
  let engines: QuotaEngine[];
  beforeAll(async () => {
    fixtures = [memoryFixture(), redisFixture(redis()), clusterFixture(cluster())];
    await fixtures[2]!.store.ready();
    engines = fixtures.map((f) => new QuotaEngine(POLICIES, f.store));
  });

  /**
   * Advances virtual time past any key Redis would let lapse on its own
   * (real) clock before the next step: a refund can leave a bucket a few ms
   * from full, with a TTL that short. Past its TTL, such a key reads as an
   * absent one does (full), on every store.
   */
  async function clearOfRealExpiry(now: number): Promise<number> {
    const client = redis().client();
    let next = now;
    for (const key of await client.keys('*')) {
      const ttl = await client.pttl(key);
      if (ttl >= 0 && ttl < 5_000) next = Math.max(next, now + ttl + 1);
    }
    // Clear of the last 5 s of a minute: windows expire there.
    if (next % 60_000 > 55_000) next = next - (next % 60_000) + 60_000;
    return next;
  }

  async function run(policy: string, start: number, steps: readonly Step[]): Promise<void> {
    await Promise.all(fixtures.map((f) => f.reset()));
    let now = start - (start % 60_000);
    const reserved: Array<{ user: string; tenant: string; id: string }> = [];
    for (const [i, { dt, user, tenant, op: o }] of steps.entries()) {
      now = await clearOfRealExpiry(now + dt);
      for (const f of fixtures) f.clock.set(now);
      const context = `${policy} step ${i}: ${JSON.stringify({ dt, user, tenant, op: o })}`;
      let answers: unknown[];
      if (o.kind === 'allow') {
        const requestId = o.id ? `r${i}` : '';
        if (o.id) reserved.push({ user, tenant, id: requestId });
        answers = await Promise.all(engines.map((e) => e.allow({ policy, identity: { user, tenant }, cost: o.cost, requestId }).catch(asAnswer)));
      } else if (o.kind === 'settle') {
        const target = o.known && reserved.length > 0 ? reserved[i % reserved.length]! : { user, tenant, id: `unknown-${i}` };
        answers = await Promise.all(
          engines.map((e) =>
            e.settle({ policy, identity: { user: target.user, tenant: target.tenant }, requestId: target.id, actualCost: o.actual }).catch(asAnswer),
          ),
        );
      } else {
        const limits = POLICIES.get(policy)!.limits;
        const calls = limits.map((limit) => ({
          limit,
          identityKey: identityKey(limit.name, limit.keyBy, limit.keyBy === 'user' ? user : tenant),
          cost: o.cost,
        }));
        // Each call on its own: on the cluster the limits may live in different slots.
        answers = await Promise.all(fixtures.map((f) => Promise.all(calls.map((call) => decideAll(f.store, [call], 'charge')))));
      }
      const [model, ...others] = answers;
      others.forEach((answer, j) => expect(answer, `${context} on ${fixtures[j + 1]!.name}`).toEqual(model));
      const identity = { user, tenant };
      const [peek, ...peeks] = await Promise.all(engines.map((e) => e.getQuota({ policy, identity })));
      peeks.forEach((limits, j) => expect(limits, `GetQuota after ${context} on ${fixtures[j + 1]!.name}`).toEqual(peek));
    }
  }

  it.each([...Object.keys(ALGORITHMS), 'multi'])('%s: same answers and statuses for random sequences', async (policy) => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 4_102_444_800_000 }), fc.array(step, { minLength: 1, maxLength: 30 }), (start, steps) =>
        run(policy, start, steps),
      ),
      { numRuns: policy === 'multi' ? 40 : 25 },
    );
  });
});
