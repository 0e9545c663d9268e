import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeIdentityValue, identityKey, VirtualClock } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { Shard } from '../support/redis-cluster.js';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

/** The key layout (docs/keys.md) measured on a real 3-master cluster, with Redis's own CLUSTER KEYSLOT. */
const orders = limitFrom({ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
const perMinute = limitFrom({ name: 'user-per-minute', key_by: 'user', algorithm: 'fixed_window', limit: 120, window: 'minute' });

/** The keys one identity owns under the two limits above, at virtual time T0. */
function keysOf(id: string): [string, string] {
  return [identityKey(orders.name, orders.keyBy, id), `${identityKey(perMinute.name, perMinute.keyBy, id)}:minute`];
}

describe('state keys on a real Redis Cluster', () => {
  const cluster = useRedisCluster();
  let shards: readonly Shard[];
  let store: RedisStore;
  beforeAll(async () => {
    shards = (await cluster().topology()).shards;
    store = RedisStore.connectCluster(cluster().seeds, { clock: new VirtualClock(T0) });
    await store.ready();
  });
  afterAll(async () => {
    await store?.close();
  });

  /** Redis's own slot of each key, in one pipeline. */
  async function slotsOf(keys: readonly string[]): Promise<number[]> {
    const pipeline = cluster().node(shards[0]!.masterPort).pipeline();
    for (const key of keys) pipeline.call('CLUSTER', 'KEYSLOT', key);
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, slot]) => {
      if (error) throw error;
      return Number(slot);
    });
  }

  function masterOf(slot: number): number {
    const shard = shards.find((s) => s.slots.some(([a, b]) => slot >= a && slot <= b));
    if (shard === undefined) throw new Error(`slot ${slot} not served`);
    return shard.masterPort;
  }

  /** Share of identities per master, for identities whose keys are hashed on the real cluster. */
  async function spread(ids: readonly string[]): Promise<number[]> {
    const slots = await slotsOf(ids.map((id) => identityKey('orders', 'user', id)));
    const counts = new Map(shards.map((s) => [s.masterPort, 0]));
    for (const slot of slots) counts.set(masterOf(slot), (counts.get(masterOf(slot)) ?? 0) + 1);
    return [...counts.values()].map((n) => n / ids.length);
  }

  it('10k random identities spread over all 3 masters, none above 40% (expected 33.3% each)', async () => {
    const identity = fc.oneof(fc.nat().map(String), fc.uuid(), fc.emailAddress(), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }));
    const ids = [...new Set(fc.sample(identity, { numRuns: 12_000, seed: 4 }))].slice(0, 10_000);
    expect(ids).toHaveLength(10_000);
    const shares = await spread(ids);
    expect(shares).toHaveLength(3);
    for (const share of shares) {
      expect(share).toBeGreaterThan(0.28);
      expect(share).toBeLessThan(0.4);
    }
  });

  it('sequential user ids 1..10000 spread the same way', async () => {
    const shares = await spread(Array.from({ length: 10_000 }, (_, i) => String(i + 1)));
    for (const share of shares) {
      expect(share).toBeGreaterThan(0.28);
      expect(share).toBeLessThan(0.4);
    }
  });

  const crafted = [
    'a:b',
    'a',
    'b',
    'a%3Ab',
    'a%3ab',
    '{x}',
    'x',
    '}{',
    '}x{',
    '{',
    '}',
    '{}',
    '%',
    '%25',
    'a b',
    'a+b',
    '*',
    '?',
    '[a]',
    'ａ:b',
    'а:b',
    'e\u0301',
    'é',
    '😀',
    'user:{42}',
    '42}:minute:1',
    'x'.repeat(256),
    'é'.repeat(128),
  ];

  it('crafted identities: all keys of one identity share the slot of its encoded value, whatever bytes it holds', async () => {
    const keys = crafted.flatMap((id) => [...keysOf(id), encodeIdentityValue(id)]);
    const slots = await slotsOf(keys);
    crafted.forEach((id, i) => {
      const [bucket, window, bare] = slots.slice(3 * i, 3 * i + 3);
      expect({ id, bucket, window }).toEqual({ id, bucket: bare, window: bare });
    });
  });

  it('crafted identities never share state: each spends a whole bucket and a whole window of its own, on the master of its slot', async () => {
    for (const id of crafted) {
      const [bucketKey, windowKey] = keysOf(id);
      const bucket = await decideLimit(store, orders, bucketKey, 10);
      const window = await decideLimit(store, perMinute, identityKey(perMinute.name, perMinute.keyBy, id), 120);
      // A collision with an earlier identity would find its bucket or window already spent.
      expect({ id, bucket: bucket.allowed, window: window.allowed }).toEqual({ id, bucket: true, window: true });
      const owner = cluster().node(masterOf((await slotsOf([bucketKey]))[0]!));
      expect(await owner.exists(bucketKey, windowKey)).toBe(2);
    }
    const sizes = await Promise.all(shards.map((s) => cluster().node(s.masterPort).dbsize()));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(2 * crafted.length);
  });
});
