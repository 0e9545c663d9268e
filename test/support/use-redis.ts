import { afterAll, beforeAll, beforeEach, describe } from 'vitest';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisCluster, type RedisCluster, type RedisClusterOptions } from './redis-cluster.js';
import { startRedisServer, type RedisServer, type RedisServerOptions } from './redis-server.js';
import { clusterFixture, memoryFixture, redisFixture, type StoreFixture } from './store-fixtures.js';

/** A redis-server for the enclosing test file or describe block; the getter works inside tests and hooks. */
export function useRedisServer(options?: RedisServerOptions): () => RedisServer {
  let server: RedisServer | undefined;
  beforeAll(async () => {
    server = await startRedisServer(options);
  });
  afterAll(async () => {
    await server?.stop();
  });
  return () => {
    if (server === undefined) throw new Error('redis-server not started yet: use it inside a test or hook');
    return server;
  };
}

/**
 * Both stores, for describe.each: the same assertions on the embedded store
 * and on real Redis (its decide script loaded as a function library, as the
 * service runs it; the first reset() loads it).
 */
export function bothStores(redis: () => RedisServer): [string, () => StoreFixture][] {
  return [
    ['memory', () => memoryFixture()],
    ['redis', () => redisFixture(redis(), { ready: true })],
  ];
}

/** A 3-master + 3-replica Redis Cluster for the enclosing test file or describe block (started once, about 2 s). */
export function useRedisCluster(options?: RedisClusterOptions): () => RedisCluster {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await startRedisCluster(options);
  });
  afterAll(async () => {
    await cluster?.stop();
  });
  return () => {
    if (cluster === undefined) throw new Error('Redis Cluster not started yet: use it inside a test or hook');
    return cluster;
  };
}

/**
 * A Redis Cluster and a store fixture on it (RedisStore.connectCluster with a
 * virtual clock), emptied and its clock reset before each test.
 */
export function useClusterFixture(options?: RedisClusterOptions): { cluster: () => RedisCluster; fixture: () => StoreFixture } {
  const cluster = useRedisCluster(options);
  let fixture: StoreFixture | undefined;
  beforeAll(async () => {
    fixture = clusterFixture(cluster());
    await fixture.store.ready();
  });
  beforeEach(async () => {
    await fixture?.reset();
  });
  afterAll(async () => {
    await fixture?.store.close();
  });
  return {
    cluster,
    fixture: () => {
      if (fixture === undefined) throw new Error('cluster fixture not ready yet: use it inside a test or hook');
      return fixture;
    },
  };
}

/**
 * `scenarios` on the embedded store, one Redis node and a Redis Cluster, each
 * in a describe block titled `${subject} on ...`, with a fresh fixture per
 * test. On Redis, `anotherReplica` opens a second store on the same Redis and
 * virtual clock, as another service replica would connect (the caller closes
 * it); on the embedded store there is none: its state is its process's own.
 */
export function onEveryStore(subject: string, scenarios: (fixture: () => StoreFixture, anotherReplica?: () => RedisStore) => void): void {
  describe(`${subject} on the embedded store`, () => {
    scenarios(() => memoryFixture());
  });
  describe(`${subject} on one Redis node`, () => {
    const redis = useRedisServer();
    let current: StoreFixture | undefined;
    beforeEach(async () => {
      await current?.store.close();
      current = redisFixture(redis(), { ready: true });
      await current.reset();
    });
    afterAll(async () => {
      await current?.store.close();
    });
    scenarios(
      () => current!,
      () => new RedisStore(redis().client(), { clock: current!.clock }),
    );
  });
  describe(`${subject} on a Redis Cluster`, () => {
    const { cluster, fixture } = useClusterFixture();
    scenarios(fixture, () => RedisStore.connectCluster(cluster().seeds, { clock: fixture().clock }));
  });
}
