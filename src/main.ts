// The only place that reads the environment, handles signals and wires the parts.
import { ConfigError, loadConfig } from './config/env.js';
import { loadPolicyFile, PolicyFileError } from './config/policies.js';
import { QuotaEngine } from './engine/engine.js';
import { startQuotaServer } from './grpc/server.js';
import { createLogger } from './logger.js';
import { MemoryStore } from './store/memory.js';
import { RedisStore } from './store/redis.js';
import type { QuotaStore } from './store/store.js';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger(config.QUOTA_LOG_LEVEL);
  if (config.unknownVariables.length > 0) {
    logger.warn({ variables: config.unknownVariables }, 'ignoring unknown QUOTA_* variables (typo?)');
  }
  const policies = await loadPolicyFile(config.QUOTA_POLICIES);
  logger.info({ file: config.QUOTA_POLICIES, policies: [...policies.keys()] }, 'policies loaded');

  const store: QuotaStore = config.QUOTA_REDIS_URL
    ? RedisStore.connect(config.QUOTA_REDIS_URL)
    : config.QUOTA_REDIS_CLUSTER
      ? RedisStore.connectCluster(config.QUOTA_REDIS_CLUSTER)
      : new MemoryStore();
  if (store instanceof MemoryStore) {
    logger.info('no Redis configured (QUOTA_REDIS_URL, QUOTA_REDIS_CLUSTER): using the embedded in-memory store; state is per process and lost on restart');
  } else {
    logger.info({ store: store.description }, 'deciding in Redis');
  }
  if (config.QUOTA_METRICS_ADDR) {
    logger.warn({ addr: config.QUOTA_METRICS_ADDR }, 'QUOTA_METRICS_ADDR is accepted, but this release does not serve /metrics yet');
  }

  const server = await startQuotaServer({ engine: new QuotaEngine(policies, store), address: config.QUOTA_GRPC_ADDR, logger });
  logger.info({ addr: config.QUOTA_GRPC_ADDR, port: server.port }, 'quota service listening');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, graceMs: config.QUOTA_SHUTDOWN_GRACE_MS }, 'shutting down: draining calls');
    await server.shutdown(config.QUOTA_SHUTDOWN_GRACE_MS);
    await store.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  const waiting = setTimeout(() => logger.warn({ store: store.description }, 'store not answering yet: health stays NOT_SERVING'), 5_000);
  await store.ready();
  clearTimeout(waiting);
  const eviction = (store as QuotaStore).evictionRisk?.();
  if (eviction?.status === 'at_risk') logger.warn({ store: store.description, policies: eviction.policies }, eviction.message);
  if (eviction?.status === 'unknown') logger.warn({ store: store.description }, eviction.message);
  server.setServing(true);
  logger.info({ store: store.description }, 'store ready: health SERVING');
}

main().catch((error: unknown) => {
  // Before the logger exists (bad env) this is the only voice we have.
  const known = error instanceof ConfigError || error instanceof PolicyFileError;
  process.stderr.write(`quota-service: ${known ? (error as Error).message : (error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
