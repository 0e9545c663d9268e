import { afterAll, beforeAll, beforeEach } from 'vitest';
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

/** Both stores, for describe.each: the same assertions on the embedded store and on real Redis. */
export function bothStores(redis: () => RedisServer): [string, () => StoreFixture][] {
  return [
    ['memory', () => memoryFixture()],
    ['redis', () => redisFixture(redis())],
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
