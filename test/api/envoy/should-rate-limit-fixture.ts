import type { RedisCluster } from '../../support/redis-cluster.js';
import type { RedisServer } from '../../support/redis-server.js';
import { rlsConfigDir, type RlsStatus } from '../../support/rls-client.js';
import { type RlsService, useRlsService } from '../../support/rls-service.js';
import { useRedisCluster, useRedisServer } from '../../support/use-redis.js';
import { ECOSYSTEM_EXAMPLES, README_EXAMPLES } from './rls-configs.js';

/**
 * What the ShouldRateLimit test files share: Envoy's rate limit service in a
 * real service process, called by a client built from Envoy's protos, on the
 * embedded store, a single Redis and a 3+3 Redis Cluster, with the
 * envoyproxy/ratelimit README examples and the ecosystem examples loaded.
 */
const config = rlsConfigDir({ ...README_EXAMPLES, ...ECOSYSTEM_EXAMPLES });

/** A store, for describe.each: its name, the service's environment, and the keys of the store as a test can list them (none for the embedded store: its state is the service process's own). */
export type RlsStore = [string, () => Record<string, string>, (() => Promise<string[]>) | undefined];

/** The three stores; the Redis server and the Redis Cluster run for the whole test file. Call at a test file's top level. */
export function rlsStores(): RlsStore[] {
  const redis = useRedisServer();
  const cluster = useRedisCluster();
  return [
    ['embedded store', () => ({}), undefined],
    ['single Redis', () => ({ QUOTA_REDIS_URL: (redis() as RedisServer).url }), () => redisKeys(redis())],
    ['Redis Cluster', () => ({ QUOTA_REDIS_CLUSTER: (cluster() as RedisCluster).seeds.join(',') }), () => clusterKeys(cluster())],
  ];
}

async function redisKeys(server: RedisServer): Promise<string[]> {
  const client = server.client();
  const keys = await client.keys('*');
  client.disconnect();
  return keys;
}

async function clusterKeys(cluster: RedisCluster): Promise<string[]> {
  const shards = (await cluster.topology()).shards;
  return (await Promise.all(shards.map((shard) => cluster.node(shard.masterPort).keys('*')))).flat();
}

/** A service process on the store `env` configures, for the enclosing describe block: started before its tests, killed after them. */
export function rlsService(env: () => Record<string, string>): RlsService {
  // A generous store budget: this shared machine stalls now and then, and a stall must not become a failure mode here.
  return useRlsService(() => ({ QUOTA_RLS_CONFIG: config, QUOTA_RLS_STORE_TIMEOUT_MS: '2000', QUOTA_METRICS_ADDR: '127.0.0.1:0', ...env() }));
}

/** A Duration as Envoy reads it, in whole seconds. */
export const seconds = (status: RlsStatus) => Number(status.duration_until_reset?.seconds);
