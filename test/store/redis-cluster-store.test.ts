import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityKey, StoreUnavailableError } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { limitFrom } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

const orders = limitFrom({ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
const perMinute = limitFrom({ name: 'user-per-minute', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' });

describe('RedisStore on a Redis Cluster (QUOTA_REDIS_CLUSTER)', () => {
  const cluster = useRedisCluster();
  let store: RedisStore;
  beforeAll(async () => {
    store = RedisStore.connectCluster(cluster().seeds.slice(0, 2));
    await store.ready();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('names its seeds, and only host:port of them', () => {
    expect(store.description).toBe(`redis cluster seeds ${cluster().seeds.slice(0, 2).join(',')}`);
    const withPassword = RedisStore.connectCluster([`redis://:s3cret@${cluster().seeds[0]}`]);
    expect(withPassword.description).toBe(`redis cluster seeds ${cluster().seeds[0]}`);
    return withPassword.close();
  });

  it('decides on every master: each identity spends from its own bucket on the shard of its slot', async () => {
    // Users a, b and c hash to three different masters (their tags are the bare letters).
    const owners = new Set<number>();
    for (const user of ['a', 'b', 'c']) {
      const key = identityKey(orders.name, orders.keyBy, user);
      owners.add(await cluster().ownerOf(key));
      const outcomes = [];
      for (let i = 0; i < 11; i++) outcomes.push((await decideLimit(store, orders, key, 1)).allowed);
      expect(outcomes).toEqual([...Array(10).fill(true), false]);
      expect(
        await cluster()
          .node(await cluster().ownerOf(key))
          .exists(key),
      ).toBe(1);
      const windowKey = identityKey(perMinute.name, perMinute.keyBy, user);
      expect((await decideLimit(store, perMinute, windowKey, 3)).allowed).toBe(true);
      expect((await decideLimit(store, perMinute, windowKey, 1)).allowed).toBe(false);
    }
    expect(owners.size).toBe(3);
  });

  it('ready() checked maxmemory-policy on every master: noeviction is safe', async () => {
    const masters = (await cluster().topology()).shards.map((s) => `127.0.0.1:${s.masterPort}`);
    expect(store.parts.evictionRisk()).toEqual({ status: 'safe', policies: Object.fromEntries(masters.map((m) => [m, 'noeviction'])) });
  });

  it('one master with allkeys-lru is named in the eviction risk', async () => {
    const [, second] = (await cluster().topology()).shards;
    const admin = cluster().node(second!.masterPort);
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const other = RedisStore.connectCluster(cluster().seeds);
    try {
      await other.ready();
      const risk = other.parts.evictionRisk();
      expect(risk?.status).toBe('at_risk');
      expect(risk?.status === 'at_risk' && Object.entries(risk.policies).filter(([, p]) => p !== 'noeviction')).toEqual([
        [`127.0.0.1:${second!.masterPort}`, 'allkeys-lru'],
      ]);
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await other.close();
    }
  });
});

describe('RedisStore on a Redis Cluster that requires a password', () => {
  const cluster = useRedisCluster({ password: 'cluster s3cret' });

  it('redis://:password@ seeds authenticate on every node, including the discovered ones', async () => {
    const store = RedisStore.connectCluster([`redis://:${encodeURIComponent('cluster s3cret')}@${cluster().seeds[0]}`]);
    try {
      await store.ready();
      expect(store.description).toBe(`redis cluster seeds ${cluster().seeds[0]}`);
      for (const user of ['a', 'b', 'c']) expect((await decideLimit(store, orders, identityKey('orders', 'user', user), 1)).allowed).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('without the password, a decision is a clear store error, not a hang', async () => {
    const store = RedisStore.connectCluster([cluster().seeds[0]!]);
    try {
      await expect(decideLimit(store, orders, identityKey('orders', 'user', 'a'), 1)).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });
});
