import calculateSlot from 'cluster-key-slot';
import { expect, it } from 'vitest';
import { stringify } from 'yaml';
import { identityKey, InvalidArgumentError, overrideKey, PARAMETER_SOURCE, parsePolicies } from '@quota-service/core';
import type { QuotaEngine } from '../../src/engine/engine.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { type AdminSetup, adminSetup, replicaOf } from '../support/admin-fixture.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { onEveryStore } from '../support/use-redis.js';

/**
 * Runtime overrides on the embedded store, one Redis node and the 3+3
 * cluster: precedence (exact > longest prefix > plan > default), what each
 * decision and GetQuota say applied, expiry on the store's (virtual) clock,
 * hostile identity values, and, on Redis, other replicas applying a change
 * with their next decision.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      api: {
        limits: [
          { name: 'calls', key_by: 'tenant', algorithm: 'token_bucket', capacity: 5, refill_per_second: 1, plan_by: 'plan', plans: { pro: { capacity: 50 } } },
          { name: 'per-user', key_by: 'user', algorithm: 'fixed_window', limit: 100, window: 'minute' },
        ],
      },
    },
  }),
);

const LOOPBACK = { name: 'tester', peer: '127.0.0.1:1' };
const bucket = (capacity: number) => ({ algorithm: 'token_bucket' as const, fields: { capacity } });

/** The `calls` limit's status for a tenant (user u), after one allowed or denied decision. */
async function calls(engine: QuotaEngine, tenant: string, plan?: string) {
  const decision = await engine.allow({ policy: 'api', identity: { tenant, user: 'u', ...(plan === undefined ? {} : { plan }) }, cost: 1, requestId: '' });
  const status = decision.limits[0]!;
  return { limit: status.limit, applied: status.applied, plan: status.plan };
}

const set = (s: AdminSetup, match: 'exact' | 'prefix', value: string, capacity: number, ttlMs = 0) =>
  s.admin.setOverride({ target: { limit: 'calls', match, value }, parameters: bucket(capacity), ttlMs, reason: `test ${value}` }, LOOPBACK);
const remove = (s: AdminSetup, match: 'exact' | 'prefix', value: string) => s.admin.deleteOverride({ limit: 'calls', match, value }, LOOPBACK);

const { exactOverride: EXACT, wildcardOverride: WILDCARD, plan: PLAN, default: DEFAULT } = PARAMETER_SOURCE;

function scenarios(fixture: () => StoreFixture, anotherStore?: () => RedisStore) {
  it('precedence: exact > the longest matching prefix > plan > default, in Allow and in GetQuota', async () => {
    const s = adminSetup(fixture(), policies);
    expect(await calls(s.engine, 'acme', 'pro')).toEqual({ limit: 50, applied: PLAN, plan: 'pro' });
    await set(s, 'prefix', 'ac', 20);
    expect(await calls(s.engine, 'acme', 'pro')).toEqual({ limit: 20, applied: WILDCARD, plan: '' });
    expect(await calls(s.engine, 'acorn')).toEqual({ limit: 20, applied: WILDCARD, plan: '' });
    expect(await calls(s.engine, 'bcme', 'pro')).toEqual({ limit: 50, applied: PLAN, plan: 'pro' });
    await set(s, 'exact', 'acme', 200);
    expect(await calls(s.engine, 'acme', 'pro')).toEqual({ limit: 200, applied: EXACT, plan: '' });
    expect(await calls(s.engine, 'acmex')).toEqual({ limit: 20, applied: WILDCARD, plan: '' });
    await set(s, 'prefix', 'acm', 30);
    expect(await calls(s.engine, 'acmex')).toEqual({ limit: 30, applied: WILDCARD, plan: '' });
    expect(await calls(s.engine, 'acorn')).toEqual({ limit: 20, applied: WILDCARD, plan: '' });
    const peek = await s.engine.getQuota({ policy: 'api', identity: { tenant: 'acme', user: 'u' } });
    expect(peek.map((l) => [l.name, l.limit, l.applied])).toEqual([
      ['calls', 200, EXACT],
      ['per-user', 100, DEFAULT],
    ]);
    await remove(s, 'exact', 'acme');
    expect(await calls(s.engine, 'acme', 'pro')).toEqual({ limit: 30, applied: WILDCARD, plan: '' });
    await remove(s, 'prefix', 'acm');
    await remove(s, 'prefix', 'ac');
    expect(await calls(s.engine, 'acme', 'pro')).toEqual({ limit: 50, applied: PLAN, plan: 'pro' });
    expect(await calls(s.engine, 'acme')).toEqual({ limit: 5, applied: DEFAULT, plan: '' });
    expect(await s.admin.listOverrides('', LOOPBACK)).toEqual([]);
  });

  it('an override grants its capacity, and changing it never grants more than the new limit allows', async () => {
    const f = fixture();
    const s = adminSetup(f, policies);
    await set(s, 'exact', 'big', 12);
    let allowed = 0;
    for (let i = 0; i < 20; i++)
      if ((await s.engine.allow({ policy: 'api', identity: { tenant: 'big', user: 'u' }, cost: 1, requestId: '' })).allowed) allowed++;
    expect(allowed).toBe(12);
    // Raised to 100: the balance carries over (0), it refills toward the new capacity.
    await set(s, 'exact', 'big', 100);
    f.clock.advance(3_000);
    const raised = await s.engine.allow({ policy: 'api', identity: { tenant: 'big', user: 'u' }, cost: 1, requestId: '' });
    expect(raised.limits[0]).toMatchObject({ limit: 100, remaining: 2, applied: EXACT });
    // Lowered to 1 after a long idle time: a full bucket of 100 is clamped to 1.
    f.clock.advance(600_000);
    await set(s, 'exact', 'big', 1);
    const lowered = await s.engine.allow({ policy: 'api', identity: { tenant: 'big', user: 'u' }, cost: 1, requestId: '' });
    expect(lowered.limits[0]).toMatchObject({ limit: 1, remaining: 0, applied: EXACT });
    expect((await s.engine.allow({ policy: 'api', identity: { tenant: 'big', user: 'u' }, cost: 1, requestId: '' })).allowed).toBe(false);
    // A cost the override can never grant is bad input.
    await expect(s.engine.allow({ policy: 'api', identity: { tenant: 'big', user: 'u' }, cost: 2, requestId: '' })).rejects.toThrow(InvalidArgumentError);
  });

  it("a cost above the policy's capacity is granted under an override that can grant it, and refused once the override is gone", async () => {
    const s = adminSetup(fixture(), policies);
    const big = { policy: 'api', identity: { tenant: 'bulk', user: 'u' }, cost: 8, requestId: '' };
    await expect(s.engine.allow(big)).rejects.toThrow(/cost: 8 exceeds the bucket's capacity of 5/);
    await set(s, 'exact', 'bulk', 10);
    const granted = await s.engine.allow(big);
    expect(granted.allowed).toBe(true);
    expect(granted.limits[0]).toMatchObject({ limit: 10, remaining: 2, applied: EXACT });
    const [batched] = await s.engine.allowEach([big], (decision) => decision);
    expect(batched).toMatchObject({ status: 'fulfilled', value: { allowed: false } });
    await remove(s, 'exact', 'bulk');
    await expect(s.engine.allow(big)).rejects.toThrow(/cost: 8 exceeds the bucket's capacity of 5/);
  });

  it('an override that expires falls back (store clock): exact to prefix, prefix to plan', async () => {
    const f = fixture();
    const s = adminSetup(f, policies);
    await set(s, 'prefix', 'ex', 40, 10_000);
    const { current } = await set(s, 'exact', 'expiring', 99, 60_000);
    expect(current.expiresAtMs).toBe(f.clock.now() + 60_000);
    expect(await calls(s.engine, 'expiring')).toMatchObject({ limit: 99, applied: EXACT });
    expect(await calls(s.engine, 'exit', 'pro')).toMatchObject({ limit: 40, applied: WILDCARD });
    f.clock.advance(9_999);
    expect(await calls(s.engine, 'exit', 'pro')).toMatchObject({ limit: 40, applied: WILDCARD });
    f.clock.advance(1);
    expect(await calls(s.engine, 'exit', 'pro')).toEqual({ limit: 50, applied: PLAN, plan: 'pro' });
    expect(await calls(s.engine, 'expiring')).toMatchObject({ limit: 99, applied: EXACT });
    f.clock.advance(49_999);
    expect(await calls(s.engine, 'expiring')).toMatchObject({ limit: 99, applied: EXACT });
    f.clock.advance(1);
    expect(await calls(s.engine, 'expiring')).toEqual({ limit: 5, applied: DEFAULT, plan: '' });
    expect(await s.admin.listOverrides('calls', LOOPBACK)).toEqual([]);
    await expect(s.admin.getOverride({ limit: 'calls', match: 'exact', value: 'expiring' }, LOOPBACK)).rejects.toThrow(/no exact override/);
  });

  it('hostile values: matching is on the raw value of the limit\'s own part, "*" is a plain character, and no value reaches another key or slot', async () => {
    const s = adminSetup(fixture(), policies);
    await set(s, 'exact', 'premium_*', 11);
    await set(s, 'prefix', 'vip{', 12);
    await set(s, 'prefix', 't1:', 13);
    // "premium_*" is one value, never a pattern.
    expect(await calls(s.engine, 'premium_*')).toMatchObject({ limit: 11, applied: EXACT });
    expect(await calls(s.engine, 'premium_x')).toMatchObject({ limit: 5, applied: DEFAULT });
    // The prefix matches raw values: "vip{" is not the encoded "vip%7B", and the other way round.
    expect(await calls(s.engine, 'vip{a}:x')).toMatchObject({ limit: 12, applied: WILDCARD });
    expect(await calls(s.engine, 'vip%7Ba')).toMatchObject({ limit: 5, applied: DEFAULT });
    await set(s, 'prefix', 'vip%7B', 14);
    expect(await calls(s.engine, 'vip{b')).toMatchObject({ limit: 12, applied: WILDCARD });
    // "t1:" matches only values that start with it; "t1" and "t10" are other tenants.
    expect(await calls(s.engine, 't1:{t2}')).toMatchObject({ limit: 13, applied: WILDCARD });
    expect(await calls(s.engine, 't10')).toMatchObject({ limit: 5, applied: DEFAULT });
    // An override of the tenant limit never applies through another identity part.
    const byUser = await s.engine.allow({ policy: 'api', identity: { tenant: 'other', user: 'premium_*' }, cost: 1, requestId: '' });
    expect(byUser.limits.map((l) => [l.limit, l.applied])).toEqual([
      [5, DEFAULT],
      [100, DEFAULT],
    ]);
    // The exact override of a hostile value lives in the value's own slot, beside its state.
    for (const value of ['a}{b', '{x}', 'user:{42}', 'premium_*']) {
      expect(calculateSlot(overrideKey('calls', 'tenant', value))).toBe(calculateSlot(identityKey('calls', 'tenant', value)));
    }
    expect((await s.admin.listOverrides('', LOOPBACK)).map((o) => [o.match, o.value])).toEqual([
      ['exact', 'premium_*'],
      ['prefix', 't1:'],
      ['prefix', 'vip%7B'],
      ['prefix', 'vip{'],
    ]);
  });

  it('bad input names the field and writes nothing', async () => {
    const s = adminSetup(fixture(), policies);
    const bad = (input: Partial<Parameters<AdminSetup['admin']['setOverride']>[0]>) =>
      s.admin.setOverride({ target: { limit: 'calls', match: 'exact', value: 'x' }, parameters: bucket(10), ttlMs: 0, reason: '', ...input }, LOOPBACK);
    await expect(bad({ target: { limit: 'nope', match: 'exact', value: 'x' } })).rejects.toThrow(/^key\.limit: no limit named "nope"/);
    await expect(bad({ target: { limit: 'calls', match: undefined, value: 'x' } })).rejects.toThrow(/^key\.match:/);
    await expect(bad({ target: { limit: 'calls', match: 'exact', value: '' } })).rejects.toThrow(/^key\.value: must not be empty/);
    await expect(bad({ target: { limit: 'calls', match: 'prefix', value: 'a\u0000' } })).rejects.toThrow(/^key\.value: must not contain control characters/);
    await expect(bad({ parameters: { algorithm: 'fixed_window', fields: { limit: 5 } } })).rejects.toThrow(/^parameters: limit "calls" is a token_bucket/);
    await expect(bad({ parameters: bucket(-1) })).rejects.toThrow(/^parameters\.token_bucket\.capacity:/);
    await expect(
      bad({ target: { limit: 'per-user', match: 'exact', value: 'x' }, parameters: { algorithm: 'fixed_window', fields: { limit: 5, window: 'hour' } } }),
    ).rejects.toThrow(/^parameters\.fixed_window\.window: cannot differ from the limit's own window/);
    await expect(bad({ parameters: undefined })).rejects.toThrow(/^parameters: required/);
    await expect(bad({ ttlMs: -1 })).rejects.toThrow(/^ttl_ms:/);
    await expect(bad({ reason: 'line\nbreak' })).rejects.toThrow(/^reason:/);
    expect(await s.admin.listOverrides('', LOOPBACK)).toEqual([]);
  });

  if (anotherStore !== undefined) {
    it("another replica's batches and cross-slot requests (user and tenant limits) apply a change at once, and spend only under it", async () => {
      const f = fixture();
      const s = adminSetup(f, policies);
      const store = anotherStore();
      await store.ready();
      const replica = replicaOf(f, policies, store);
      try {
        const inputs = ['b1', 'b2', 'b3'].map((tenant) => ({ policy: 'api', identity: { tenant, user: `user-${tenant}` }, cost: 1, requestId: '' }));
        const batch = async () =>
          (await replica.allowEach(inputs, (d) => d)).map((r) => (r.status === 'fulfilled' ? r.value.limits.map((l) => [l.limit, l.applied]) : r.reason));
        expect(await batch()).toEqual(
          inputs.map(() => [
            [5, DEFAULT],
            [100, DEFAULT],
          ]),
        );
        await set(s, 'exact', 'b2', 60);
        await s.admin.setOverride(
          {
            target: { limit: 'per-user', match: 'prefix', value: 'user-b' },
            parameters: { algorithm: 'fixed_window', fields: { limit: 7 } },
            ttlMs: 0,
            reason: '',
          },
          LOOPBACK,
        );
        expect(await batch()).toEqual([
          [
            [5, DEFAULT],
            [7, WILDCARD],
          ],
          [
            [60, EXACT],
            [7, WILDCARD],
          ],
          [
            [5, DEFAULT],
            [7, WILDCARD],
          ],
        ]);
        // The raise did not fill b2's bucket (4 tokens left then, 3 now, frozen clock): 3 more pass,
        // and the denied ones spend nothing from the user's window of 7 (2 counted, then 3).
        let passed = 0;
        for (let i = 0; i < 8; i++) if ((await replica.allow(inputs[1]!)).allowed) passed++;
        expect(passed).toBe(3);
        const [bucket, window] = await replica.getQuota({ policy: 'api', identity: inputs[1]!.identity });
        expect([bucket!.remaining, bucket!.limit, window!.remaining, window!.limit]).toEqual([0, 60, 2, 7]);
      } finally {
        await store.close();
      }
    });

    it('every replica applies a change with its next decision: set, replace and delete, exact and prefix', async () => {
      const f = fixture();
      const s = adminSetup(f, policies);
      const stores = [anotherStore(), anotherStore()];
      for (const store of stores) await store.ready();
      const replicas = stores.map((store) => replicaOf(f, policies, store));
      try {
        // Each replica has decided before (its view is "no overrides").
        for (const replica of replicas) expect(await calls(replica, 'r1')).toMatchObject({ limit: 5, applied: DEFAULT });
        await set(s, 'exact', 'r1', 70);
        for (const replica of replicas) expect(await calls(replica, 'r1')).toMatchObject({ limit: 70, applied: EXACT });
        await set(s, 'exact', 'r1', 71);
        for (const replica of replicas) expect(await calls(replica, 'r1')).toMatchObject({ limit: 71, applied: EXACT });
        await set(s, 'prefix', 'r', 80);
        for (const replica of replicas) expect(await calls(replica, 'r2')).toMatchObject({ limit: 80, applied: WILDCARD });
        await remove(s, 'exact', 'r1');
        for (const replica of replicas) expect(await calls(replica, 'r1')).toMatchObject({ limit: 80, applied: WILDCARD });
        await remove(s, 'prefix', 'r');
        for (const replica of replicas) {
          expect(await calls(replica, 'r2')).toMatchObject({ limit: 5, applied: DEFAULT });
          expect((await replica.getQuota({ policy: 'api', identity: { tenant: 'r1', user: 'u' } }))[0]).toMatchObject({ limit: 5, applied: DEFAULT });
        }
      } finally {
        for (const store of stores) await store.close();
      }
    });
  }
}

onEveryStore('overrides', scenarios);
