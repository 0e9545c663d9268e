import { expect, it } from 'vitest';
import { stringify } from 'yaml';
import { identityKey, parsePolicies } from '@quota-service/core';
import type { QuotaEngine } from '../../../src/engine/engine.js';
import type { RedisStore } from '../../../src/store/redis/redis-store.js';
import { adminSetup, replicaOf } from '../../support/admin-fixture.js';
import type { StoreFixture } from '../../support/store-fixtures.js';
import { onEveryStore } from '../../support/use-redis.js';

/**
 * ResetQuota on the embedded store, one Redis node and the 3+3 cluster.
 *
 * What a reset during a burst may grant, precisely: Redis (or the embedded
 * store) orders every decision and the reset. The decisions ordered before
 * the reset spend from the bucket as it was; the reset makes it full; the
 * decisions after it spend from that full bucket. So for a token bucket of
 * capacity C and rate r, the units granted after a reset at t_r up to any
 * time t are at most C + r * (t - t_r), and a reset grants at most one extra
 * full bucket. On a frozen clock (r * 0 = 0) an identity whose bucket starts
 * full is granted at most 2C during a burst with one reset, and the
 * `remaining` of the allowed decisions are two runs C-1, C-2, ...: each value
 * at most twice, the second run a prefix of the first.
 */
const C = 10;
const policies = parsePolicies(
  stringify({
    policies: {
      orders: { limits: [{ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: C, refill_per_second: 2 }] },
      combo: {
        limits: [
          { name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: C, refill_per_second: 2 },
          { name: 'per-minute', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' },
          { name: 'tenant-gcra', key_by: 'tenant', algorithm: 'gcra', capacity: 4, refill_per_second: 1 },
        ],
      },
      jobs: {
        limits: [
          { name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 2, lease_ttl_ms: 30_000 },
          { name: 'jobs-per-user', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 0.001 },
        ],
      },
      slots: { limits: [{ name: 'slots', key_by: 'tenant', algorithm: 'concurrency', limit: 1, lease_ttl_ms: 30_000 }] },
    },
  }),
);

const allow = (engine: QuotaEngine, policy: string, identity: Record<string, string>) => engine.allow({ policy, identity, cost: 1, requestId: '' });

function scenarios(fixture: () => StoreFixture, anotherStore?: () => RedisStore) {
  it('the next decision starts full: every limit of the policy, or only the ones named; other identities keep their state', async () => {
    const f = fixture();
    const { engine, admin } = adminSetup(f, policies);
    const who = { user: 'u1', tenant: 't1' };
    for (let i = 0; i < 3; i++) expect((await allow(engine, 'combo', who)).allowed).toBe(true);
    expect((await allow(engine, 'combo', who)).deniedBy).toBe('per-minute');
    await allow(engine, 'orders', { user: 'bystander' });
    // Only the bucket: the window still denies.
    const bucketOnly = await admin.reset({ policy: 'combo', identity: who, limits: ['orders'] });
    expect(bucketOnly.before.map((s) => [s.name, s.remaining])).toEqual([['orders', C - 3]]);
    expect(bucketOnly.after.map((s) => [s.name, s.remaining, s.resetAfterMs])).toEqual([['orders', C, 0]]);
    expect((await allow(engine, 'combo', who)).deniedBy).toBe('per-minute');
    // Everything: all three start full.
    const all = await admin.reset({ policy: 'combo', identity: who, limits: [] });
    expect(all.after.map((s) => [s.name, s.remaining])).toEqual([
      ['orders', C],
      ['per-minute', 3],
      ['tenant-gcra', 4],
    ]);
    expect((await allow(engine, 'combo', who)).limits.map((s) => s.remaining)).toEqual([C - 1, 2, 3]);
    // No key of u1 but the ones that decision wrote; the bystander's bucket is untouched.
    expect(await f.tokenBucket(identityKey('orders', 'user', 'bystander'))).toEqual({ tokens: C - 1, ts: f.clock.now() });
  });

  it('leaves concurrency leases alone: held leases stay held and count, their holders can still release them', async () => {
    const f = fixture();
    const { engine, admin } = adminSetup(f, policies);
    const acquire = (user: string, requestId: string) => engine.allow({ policy: 'jobs', identity: { tenant: 'acme', user }, cost: 1, requestId });
    expect((await acquire('u1', 'a')).allowed).toBe(true);
    expect((await acquire('u1', 'b')).allowed).toBe(true);
    expect((await acquire('u1', 'c')).deniedBy).toBe('jobs-in-flight');
    const { before, after } = await admin.reset({ policy: 'jobs', identity: { tenant: 'acme', user: 'u1' }, limits: [] });
    // Only the bucket is reset, and reported.
    expect(before.map((s) => [s.name, s.remaining])).toEqual([['jobs-per-user', 1]]);
    expect(after.map((s) => [s.name, s.remaining])).toEqual([['jobs-per-user', 3]]);
    const [inFlight] = await engine.getQuota({ policy: 'jobs', identity: { tenant: 'acme', user: 'u1' } });
    expect(inFlight).toMatchObject({ name: 'jobs-in-flight', remaining: 0, leasesHeld: 2 });
    // No third job runs beside the two held; a holder's release frees its place.
    expect((await acquire('u2', 'c')).deniedBy).toBe('jobs-in-flight');
    expect((await engine.leases.release({ policy: 'jobs', identity: { tenant: 'acme', user: 'u1' }, requestId: 'a' })).released).toBe(true);
    expect((await acquire('u2', 'd')).allowed).toBe(true);
    // Naming a concurrency limit, or a policy of concurrency limits only, is refused; nothing is reset.
    await expect(admin.reset({ policy: 'jobs', identity: { tenant: 'acme', user: 'u1' }, limits: ['jobs-in-flight'] })).rejects.toThrow(
      /^limits\[0\]: limit "jobs-in-flight" is a concurrency limit, which a reset leaves alone: leases are work still running/,
    );
    await expect(admin.reset({ policy: 'slots', identity: { tenant: 'acme' }, limits: [] })).rejects.toThrow(
      /^policy: policy "slots" has only concurrency limits, which a reset leaves alone/,
    );
    expect((await engine.getQuota({ policy: 'jobs', identity: { tenant: 'acme', user: 'u1' } }))[0]).toMatchObject({ leasesHeld: 2 });
  });

  it('a reset during a burst grants at most one more full bucket, from the reset on (frozen clock, then refill)', async () => {
    const f = fixture();
    const { engine, admin } = adminSetup(f, policies);
    const stores = anotherStore === undefined ? [] : [anotherStore(), anotherStore()];
    for (const store of stores) await store.ready();
    const replicas = [engine, ...stores.map((store) => replicaOf(f, policies, store))];
    try {
      const who = { user: 'burst' };
      // Two callers per replica, each sending its next request when the last is answered; the
      // reset starts once a quarter of the burst is answered, so it lands in its middle.
      const all: { allowed: boolean; remaining: number }[] = [];
      let sent = 0;
      let reset: Promise<unknown> | undefined;
      const caller = async (replica: QuotaEngine) => {
        while (sent < 4 * C) {
          sent++;
          const decision = await allow(replica, 'orders', who);
          all.push({ allowed: decision.allowed, remaining: decision.limits[0]!.remaining });
          if (all.length === C / 2) reset = admin.reset({ policy: 'orders', identity: who, limits: [] });
        }
      };
      await Promise.all([...replicas, ...replicas].map(caller));
      await reset;
      const granted = all.filter((d) => d.allowed);
      expect(granted.length).toBeGreaterThan(C);
      expect(granted.length).toBeLessThanOrEqual(2 * C);
      // Two runs of one full bucket each: C-1, C-2, ... at most twice, the second a prefix of the first.
      const seen = new Map<number, number>();
      for (const { remaining } of granted) seen.set(remaining, (seen.get(remaining) ?? 0) + 1);
      for (const [remaining, times] of seen) {
        expect(Number.isInteger(remaining) && remaining >= 0 && remaining <= C - 1).toBe(true);
        expect(times).toBeLessThanOrEqual(2);
        if (times === 2) for (let above = remaining + 1; above < C; above++) expect(seen.get(above)).toBe(2);
        else for (let above = remaining + 1; above < C; above++) expect(seen.get(above)).toBeGreaterThanOrEqual(1);
      }
      // What the second run spent is what the bucket is missing now.
      const afterReset = granted.length - C;
      const [now] = await engine.getQuota({ policy: 'orders', identity: who });
      expect(now!.remaining).toBe(C - afterReset);
      // Then only the refill: 2 per second.
      f.clock.advance(1_500);
      let more = 0;
      for (let i = 0; i < 2 * C; i++) if ((await allow(replicas[i % replicas.length]!, 'orders', who)).allowed) more++;
      expect(more).toBe(Math.floor(C - afterReset + 3));
    } finally {
      for (const store of stores) await store.close();
    }
  });
}

onEveryStore('reset', scenarios);
