import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { PARAMETER_SOURCE, parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useClusterFixture, useRedisServer } from '../support/use-redis.js';

/**
 * Plans: a limit's parameters picked by the value of an identity part
 * (`plan_by`), with the limit's own as the default. State stays per identity,
 * so a plan change continues from the balance, clamped to the new capacity.
 * The same on the embedded store, one Redis node and the 3+3 cluster.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      api: {
        limits: [
          {
            name: 'calls',
            key_by: 'tenant',
            algorithm: 'token_bucket',
            capacity: 5,
            refill_per_second: 1,
            plan_by: 'plan',
            // pro changes only the capacity: its refill is the default's.
            plans: { pro: { capacity: 50 }, enterprise: { capacity: 500, refill_per_second: 100 } },
          },
          { name: 'per-minute', key_by: 'tenant', algorithm: 'fixed_window', limit: 1000, window: 'minute', plan_by: 'plan', plans: { free: { limit: 8 } } },
        ],
      },
    },
  }),
);

const allow = (engine: QuotaEngine, identity: Record<string, string>, cost = 1) => engine.allow({ policy: 'api', identity, cost, requestId: '' });

function scenarios(fixture: () => StoreFixture) {
  it('each plan gets its own parameters; no plan part, or a plan not listed, gets the default; the status says which applied', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    const pro = await allow(engine, { tenant: 'a', plan: 'pro' });
    expect(pro.limits.map((l) => [l.name, l.limit, l.remaining, l.applied, l.plan])).toEqual([
      ['calls', 50, 49, PARAMETER_SOURCE.plan, 'pro'],
      ['per-minute', 1000, 999, PARAMETER_SOURCE.default, ''],
    ]);
    const enterprise = await allow(engine, { tenant: 'b', plan: 'enterprise' });
    expect(enterprise.limits[0]).toMatchObject({ limit: 500, remaining: 499, applied: PARAMETER_SOURCE.plan, plan: 'enterprise' });
    const free = await allow(engine, { tenant: 'c', plan: 'free' });
    expect(free.limits.map((l) => [l.limit, l.applied, l.plan])).toEqual([
      [5, PARAMETER_SOURCE.default, ''],
      [8, PARAMETER_SOURCE.plan, 'free'],
    ]);
    const none = await allow(engine, { tenant: 'd' });
    const unlisted = await allow(engine, { tenant: 'e', plan: 'Pro' });
    for (const decision of [none, unlisted]) {
      expect(decision.limits.map((l) => [l.limit, l.applied])).toEqual([
        [5, PARAMETER_SOURCE.default],
        [1000, PARAMETER_SOURCE.default],
      ]);
    }
    // GetQuota reports the same parameters without spending.
    const peek = await engine.getQuota({ policy: 'api', identity: { tenant: 'a', plan: 'pro' } });
    expect(peek.map((l) => [l.limit, l.remaining, l.applied, l.plan])).toEqual([
      [50, 49, PARAMETER_SOURCE.plan, 'pro'],
      [1000, 999, PARAMETER_SOURCE.default, ''],
    ]);
  });

  it('a pro tenant bursts to its plan capacity, a default one to the default capacity', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    let pro = 0;
    let basic = 0;
    for (let i = 0; i < 60; i++) {
      if ((await allow(engine, { tenant: 'p', plan: 'pro' })).allowed) pro++;
      if ((await allow(engine, { tenant: 'q', plan: 'basic' })).allowed) basic++;
    }
    expect([pro, basic]).toEqual([50, 5]);
  });

  it('a downgrade continues from the balance, clamped to the new capacity: never more than the new limit allows', async () => {
    const f = fixture();
    const engine = new QuotaEngine(policies, f.store);
    // 40 of the pro bucket's 50 left...
    expect((await allow(engine, { tenant: 'x', plan: 'pro' }, 10)).limits[0]!.remaining).toBe(40);
    // ...and the first decision on the default plan (capacity 5) sees at most 5, spends 1.
    const after = await allow(engine, { tenant: 'x' });
    expect(after.limits[0]).toMatchObject({ limit: 5, remaining: 4, applied: PARAMETER_SOURCE.default });
    let allowed = 1;
    while ((await allow(engine, { tenant: 'x' })).allowed) allowed++;
    expect(allowed).toBe(5);
    // An upgrade keeps what was spent: the bucket refills toward the new capacity from 0.
    f.clock.advance(2_000);
    expect((await allow(engine, { tenant: 'x', plan: 'pro' })).limits[0]).toMatchObject({ limit: 50, remaining: 1, applied: PARAMETER_SOURCE.plan });
  });

  it('a cost above the plan capacity is bad input, one within it is not', async () => {
    const engine = new QuotaEngine(policies, fixture().store);
    await expect(allow(engine, { tenant: 'y' }, 6)).rejects.toThrow(/cost: 6 exceeds the bucket's capacity of 5/);
    expect((await allow(engine, { tenant: 'y', plan: 'pro' }, 6)).allowed).toBe(true);
  });
}

describe('plans on the embedded store', () => {
  scenarios(() => memoryFixture());
});

describe('plans on one Redis node', () => {
  const redis = useRedisServer();
  const fixtures: StoreFixture[] = [];
  afterAll(async () => {
    for (const f of fixtures) await f.store.close();
  });
  scenarios(() => {
    const f = redisFixture(redis());
    fixtures.push(f);
    return f;
  });
});

describe('plans on a Redis Cluster', () => {
  const { fixture } = useClusterFixture();
  scenarios(fixture);
});
