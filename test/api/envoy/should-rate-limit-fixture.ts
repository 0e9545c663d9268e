import { afterAll, beforeAll } from 'vitest';
import type { RedisCluster } from '../../support/redis-cluster.js';
import type { RedisServer } from '../../support/redis-server.js';
import { type RlsClient, rlsClient, rlsConfigDir, type RlsStatus } from '../../support/rls-client.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service-process.js';
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

/** What a test uses of the service process its describe block runs. */
export interface RlsService {
  /** Calls the service (the gRPC client is made once it listens, so this one forwards to it). */
  readonly client: Pick<RlsClient, 'shouldRateLimit'>;
  /** The service's Prometheus metrics page. */
  metrics(): Promise<string>;
}

/** A service process on the store `env` configures, for the enclosing describe block: started before its tests, killed after them. */
export function rlsService(env: () => Record<string, string>): RlsService {
  let service: ServiceProcess;
  let client: RlsClient;
  let metricsPort: number;
  beforeAll(async () => {
    // A generous store budget: this shared machine stalls now and then, and a stall must not become a failure mode here.
    service = startServiceProcess({ QUOTA_RLS_CONFIG: config, QUOTA_RLS_STORE_TIMEOUT_MS: '2000', QUOTA_METRICS_ADDR: '127.0.0.1:0', ...env() });
    client = rlsClient(`127.0.0.1:${await service.port}`);
    metricsPort = Number(/"port":(\d+)/.exec(await service.logged(/"msg":"metrics at GET \/metrics"/))![1]);
    await service.logged(/health SERVING/);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    service?.signal('SIGKILL');
    await service?.exit;
  });
  return {
    client: { shouldRateLimit: (request, metadata) => client.shouldRateLimit(request, metadata) },
    metrics: async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
  };
}

/** A Duration as Envoy reads it, in whole seconds. */
export const seconds = (status: RlsStatus) => Number(status.duration_until_reset?.seconds);
