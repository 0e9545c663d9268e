import type { Redis } from 'ioredis';
import { stringify } from 'yaml';
import type { TokenBucketState } from '../../clients/core/src/algorithms/token-bucket/model.js';
import { type Limit, parsePolicies, VirtualClock } from '@quota-service/core';
import { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { QuotaStore } from '../../src/store/store.js';
import type { RedisCluster } from './redis-cluster.js';
import type { RedisServer } from './redis-server.js';

/** 2026-11-21T08:00:00Z: a fixed start for virtual time. */
export const T0 = Date.UTC(2026, 10, 21, 8, 0, 0);

/**
 * One store on a virtual clock, with read access to its state, so that the
 * same assertions run against the embedded store and against real Redis
 * (where the clock reaches the scripts as the test-only `now` argument).
 */
export interface StoreFixture {
  readonly name: 'memory' | 'redis' | 'redis-cluster';
  readonly clock: VirtualClock;
  readonly store: QuotaStore;
  tokenBucket(key: string): Promise<TokenBucketState | undefined>;
  /** A string counter's value, or a fixed window's count (the `c` of its hash). */
  counter(key: string): Promise<number | undefined>;
  /** Entries of a sliding window log or members of a lease set (live or not yet dropped), undefined when the key does not exist. */
  logSize(key: string): Promise<number | undefined>;
  /** Remaining time to live in ms, undefined when the key does not exist or has none. */
  ttl(key: string): Promise<number | undefined>;
  keys(): Promise<string[]>;
  reset(): Promise<void>;
}

export function memoryFixture(): StoreFixture {
  const clock = new VirtualClock(T0);
  const store = new MemoryStore(clock);
  const space = store.space;
  return {
    name: 'memory',
    clock,
    store,
    tokenBucket: async (key) => space.get<TokenBucketState>(key, clock.now()),
    counter: async (key) => {
      const value = space.get<number | { count: number }>(key, clock.now());
      return typeof value === 'object' ? value.count : value;
    },
    logSize: async (key) => {
      const value = space.get<number[] | Map<string, number>>(key, clock.now());
      return value instanceof Map ? value.size : value?.length;
    },
    ttl: async (key) => space.ttl(key, clock.now()),
    keys: async () => space.keys(clock.now()).sort(),
    reset: async () => {
      space.clear();
      clock.set(T0);
    },
  };
}

/**
 * `ready`: reset() also makes the store ready, once (RedisStore.ready): the
 * decide script's function library loaded, its calls sent as FCALL, as the
 * service runs it. Without it the store sends EVALSHA, its fallback where
 * Redis refuses the library.
 */
export function redisFixture(server: RedisServer, options: { ready?: boolean } = {}): StoreFixture {
  const clock = new VirtualClock(T0);
  const redis: Redis = server.client();
  const store = new RedisStore(server.client(), { clock: clock });
  let ready: Promise<void> | undefined;
  return {
    name: 'redis',
    clock,
    store,
    async tokenBucket(key) {
      const hash = await redis.hgetall(key);
      if (hash.tokens === undefined || hash.ts === undefined) return undefined;
      return { tokens: Number(hash.tokens), ts: Number(hash.ts) };
    },
    async counter(key) {
      // A fixed window's counter is a hash {w, c}; other counters are strings.
      const value = (await redis.type(key)) === 'hash' ? await redis.hget(key, 'c') : await redis.get(key);
      return value === null ? undefined : Number(value);
    },
    async logSize(key) {
      return (await redis.exists(key)) === 1 ? redis.zcard(key) : undefined;
    },
    async ttl(key) {
      const ms = await redis.pttl(key);
      return ms < 0 ? undefined : ms;
    },
    keys: async () => (await redis.keys('*')).sort(),
    reset: async () => {
      await redis.flushdb();
      clock.set(T0);
      if (options.ready === true) await (ready ??= store.ready());
    },
  };
}

/** The same on a Redis Cluster: reads route by slot, keys() and reset() cover every master. */
export function clusterFixture(cluster: RedisCluster): StoreFixture {
  const clock = new VirtualClock(T0);
  const client = cluster.client();
  // The client the service builds (RedisStore.connectCluster), with the test clock.
  const store = RedisStore.connectCluster(cluster.seeds, { clock: clock });
  const masters = async () => (await cluster.topology()).shards.map((shard) => cluster.node(shard.masterPort));
  return {
    name: 'redis-cluster',
    clock,
    store,
    async tokenBucket(key) {
      const hash = await client.hgetall(key);
      if (hash.tokens === undefined || hash.ts === undefined) return undefined;
      return { tokens: Number(hash.tokens), ts: Number(hash.ts) };
    },
    async counter(key) {
      const value = (await client.type(key)) === 'hash' ? await client.hget(key, 'c') : await client.get(key);
      return value === null ? undefined : Number(value);
    },
    async logSize(key) {
      return (await client.exists(key)) === 1 ? client.zcard(key) : undefined;
    },
    async ttl(key) {
      const ms = await client.pttl(key);
      return ms < 0 ? undefined : ms;
    },
    keys: async () => (await Promise.all((await masters()).map((node) => node.keys('*')))).flat().sort(),
    reset: async () => {
      await Promise.all((await masters()).map((node) => node.flushall()));
      clock.set(T0);
    },
  };
}

/** A single limit built through the policy file parser, as the service builds it. */
export function limitFrom(definition: Record<string, unknown>): Limit {
  const limit = parsePolicies(stringify({ policies: { test: { limits: [definition] } } })).get('test')?.limits[0];
  if (limit === undefined) throw new Error('no limit parsed');
  return limit;
}
