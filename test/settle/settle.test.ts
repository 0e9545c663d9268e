import { beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { FailedPreconditionError, InvalidArgumentError, NotFoundError, parsePolicies, requestKey } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import type { MemoryStore } from '../../src/store/memory.js';
import type { Cluster, Redis } from 'ioredis';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useClusterFixture, useRedisServer } from '../support/use-redis.js';

/**
 * Settle on every store: refunds and charges, exactly once, bound to the
 * reservation's policy and identity; hostile input is refused and writes
 * nothing. The multi-limit policy spans slots on the cluster.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      llm: { request_id_ttl_ms: 60_000, limits: [{ name: 'tokens', key_by: 'tenant', algorithm: 'token_bucket', capacity: 100, refill_per_second: 1 }] },
      bulk: {
        request_id_ttl_ms: 60_000,
        limits: [
          { name: 'bulk-user', key_by: 'user', algorithm: 'fixed_window', limit: 100, window: 'hour' },
          { name: 'bulk-tenant', key_by: 'tenant', algorithm: 'gcra', capacity: 100, refill_per_second: 0.5 },
        ],
      },
    },
  }),
);
const acme = { tenant: 'acme', user: 'u1' };

/** Every key and what it holds, as one comparable value. */
async function stateOf(f: StoreFixture, read: (key: string) => Promise<unknown>): Promise<Record<string, unknown>> {
  const state: Record<string, unknown> = {};
  for (const key of await f.keys()) state[key] = await read(key);
  return state;
}

function scenarios(fixture: () => StoreFixture, read: () => (key: string) => Promise<unknown>) {
  let f: StoreFixture;
  let engine: QuotaEngine;
  beforeEach(async () => {
    f = fixture();
    await f.reset();
    engine = new QuotaEngine(policies, f.store);
  });
  const reserve = (policy: string, cost: number, requestId: string, identity: Record<string, string> = acme) =>
    engine.allow({ policy, identity, cost, requestId });
  const settle = (policy: string, requestId: string, actualCost: number, identity: Record<string, string> = acme) =>
    engine.settle({ policy, identity, requestId, actualCost });

  it('refunds estimate - actual, once: settling again answers the first settlement and changes nothing', async () => {
    expect((await reserve('llm', 40, 'call-1')).limits[0]?.remaining).toBe(60);
    const first = await settle('llm', 'call-1', 12);
    expect(first).toMatchObject({ estimate: 40, actualCost: 12, delta: -28, alreadySettled: false, limits: [{ name: 'tokens', remaining: 88 }] });
    const again = await settle('llm', 'call-1', 3);
    expect(again).toMatchObject({ estimate: 40, actualCost: 12, delta: -28, alreadySettled: true, limits: [{ name: 'tokens', remaining: 88 }] });
    expect((await f.tokenBucket('rl:v1:tokens:tenant:{acme}'))?.tokens).toBe(88);
    // The reservation keeps its expiry: the policy's request_id_ttl_ms from the Allow.
    const memo = requestKey('llm', 'tenant', 'acme', 'tenant=acme', 'call-1');
    expect(await f.ttl(memo)).toBeGreaterThan(0);
    expect(await f.ttl(memo)).toBeLessThanOrEqual(60_000);
  });

  it('charges actual - estimate into debt: later calls wait until the balance refills', async () => {
    await reserve('llm', 10, 'call-2');
    const charged = await settle('llm', 'call-2', 150);
    expect(charged).toMatchObject({ delta: 140, alreadySettled: false, limits: [{ remaining: -50 }] });
    const denied = await reserve('llm', 1, '');
    expect(denied).toMatchObject({ allowed: false, deniedBy: 'tokens', retryAfterMs: 51_000 });
    f.clock.advance(51_000);
    expect((await reserve('llm', 1, '')).allowed).toBe(true);
  });

  it('a huge actual cost is a debt of at most one capacity, never a broken balance', async () => {
    await reserve('llm', 10, 'call-3');
    expect((await settle('llm', 'call-3', 1e308)).limits[0]?.remaining).toBe(-100);
    expect((await f.tokenBucket('rl:v1:tokens:tenant:{acme}'))?.tokens).toBe(-100);
    await reserve('bulk', 5, 'bulk-1');
    const bulk = await settle('bulk', 'bulk-1', Number.MAX_SAFE_INTEGER);
    expect(bulk.limits.map((l) => l.remaining)).toEqual([-100, 0]);
    expect(await f.counter('rl:v1:bulk-user:user:{u1}:hour')).toBe(200);
    expect((await reserve('bulk', 1, '')).deniedBy).toBe('bulk-user');
  });

  it('several limits across slots: each gets its difference, once', async () => {
    await reserve('bulk', 50, 'bulk-2');
    const settled = await settle('bulk', 'bulk-2', 0);
    expect(settled).toMatchObject({ estimate: 50, actualCost: 0, delta: -50, alreadySettled: false });
    expect(settled.limits.map((l) => l.remaining)).toEqual([100, 100]);
    expect((await settle('bulk', 'bulk-2', 0)).alreadySettled).toBe(true);
    expect(await f.counter('rl:v1:bulk-user:user:{u1}:hour')).toBe(0);
    await reserve('bulk', 10, 'bulk-3');
    expect((await settle('bulk', 'bulk-3', 30)).limits.map((l) => l.remaining)).toEqual([70, 70]);
  });

  it('hostile: another identity, an unknown or expired id, a denied Allow, bad actual costs: refused, nothing written', async () => {
    await reserve('llm', 40, 'mine');
    await reserve('bulk', 100, 'full');
    expect((await reserve('bulk', 1, 'denied')).allowed).toBe(false);
    const before = await stateOf(f, read());
    const refused = async (call: Promise<unknown>, kind: new (...args: never[]) => Error, text: RegExp) => {
      const error = await call.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(kind);
      expect((error as Error).message).toMatch(text);
    };
    await refused(settle('llm', 'mine', 0, { tenant: 'other', user: 'u1' }), NotFoundError, /^request_id: no reservation/);
    await refused(settle('llm', 'never-reserved', 0), NotFoundError, /^request_id/);
    await refused(settle('bulk', 'mine', 0), NotFoundError, /^request_id/);
    await refused(settle('bulk', 'denied', 0), FailedPreconditionError, /^request_id: its Allow was denied/);
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      await refused(settle('llm', 'mine', bad), InvalidArgumentError, /^actual_cost: must/);
    }
    await refused(settle('bulk', 'full', 2.5), InvalidArgumentError, /^actual_cost: must be a whole number for limit "bulk-user"/);
    await refused(settle('llm', '', 1), InvalidArgumentError, /^request_id: must not be empty/);
    expect(await stateOf(f, read())).toEqual(before);
    // Still the owner's to settle.
    expect((await settle('llm', 'mine', 40)).alreadySettled).toBe(false);
  });
}

describe('Settle, embedded store and single node', () => {
  const redis = useRedisServer();
  describe('memory', () => {
    let f: StoreFixture;
    scenarios(
      () => (f = memoryFixture()),
      () => async (key) => (f.store as MemoryStore).space.get(key, f.clock.now()),
    );
  });
  describe('redis', () => {
    scenarios(
      () => redisFixture(redis()),
      () => (key) => readRedis(redis().client(), key),
    );
  });

  it('an expired reservation is NOT_FOUND (virtual time on the embedded store)', async () => {
    const f = memoryFixture();
    const engine = new QuotaEngine(policies, f.store);
    await engine.allow({ policy: 'llm', identity: acme, cost: 5, requestId: 'old' });
    f.clock.advance(60_001);
    await expect(engine.settle({ policy: 'llm', identity: acme, requestId: 'old', actualCost: 1 })).rejects.toBeInstanceOf(NotFoundError);
    expect((await f.tokenBucket('rl:v1:tokens:tenant:{acme}'))?.tokens).toBe(95);
  });

  it('10,000 reservations of one identity: each record lives at most request_id_ttl_ms (embedded: gone after it; Redis: every one has that TTL)', async () => {
    const memory = memoryFixture();
    const onRedis = redisFixture(redis());
    await onRedis.reset();
    for (const f of [memory, onRedis]) {
      const engine = new QuotaEngine(policies, f.store);
      for (let i = 0; i < 10_000; i += 500) {
        await Promise.all(Array.from({ length: 500 }, (_, j) => engine.allow({ policy: 'llm', identity: acme, cost: 0.001, requestId: `id-${i + j}` })));
      }
    }
    expect(await memory.keys()).toHaveLength(10_001);
    memory.clock.advance(60_001);
    expect(await memory.keys()).toEqual(['rl:v1:tokens:tenant:{acme}']);
    const client = redis().client();
    const memos = await client.keys('rl:v1:rid:*');
    expect(memos).toHaveLength(10_000);
    const ttls = await Promise.all(memos.map((key) => client.pttl(key)));
    expect(Math.max(...ttls)).toBeLessThanOrEqual(60_000);
    expect(Math.min(...ttls)).toBeGreaterThan(0);
  });
});

describe('Settle, Redis Cluster', () => {
  const { cluster, fixture } = useClusterFixture();
  scenarios(fixture, () => (key) => readRedis(cluster().client(), key));
});

/** A key's value by its type (hash, string, sorted set). */
async function readRedis(client: Redis | Cluster, key: string): Promise<unknown> {
  const type = await client.type(key);
  if (type === 'hash') return client.hgetall(key);
  if (type === 'zset') return (client as Redis).zrange(key, '0', '-1', 'WITHSCORES');
  return client.get(key);
}
