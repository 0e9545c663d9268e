// Child process: the real quota service (engine + RedisStore + nice-grpc server
// with its middleware, health and reflection), on the Redis whose URL is argv[2],
// or on the Redis Cluster whose seeds follow `--cluster` (bench/cluster.ts).
// It runs in its own process so the load driver does not share its event loop.
import { parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { startQuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { QuotaMetrics } from '../../src/metrics/metrics.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisOverrides } from '../../src/overrides/redis-overrides.js';
import { RlsMetrics } from '../../src/api/envoy/rls-metrics.js';
import { parseRlsConfig } from '../../src/api/envoy/rls-config.js';
import { BENCH_POLICIES_YAML } from './bench-policies.js';
import { failStart, serveUntilParentLeaves } from './lifecycle.js';

/** Envoy's rate limit service (bench/rls-run.ts): the same bucket as policy `bench`, per descriptor value. */
const BENCH_RLS_YAML = `
domain: bench
descriptors:
  - key: user
    limit: { algorithm: token_bucket, capacity: 1000000000, refill_per_second: 1000000 }
`;

async function main(): Promise<void> {
  const [redisUrl, seeds] = process.argv.slice(2);
  const store =
    redisUrl === '--cluster' && seeds !== undefined && seeds.split(',').every((seed) => seed.startsWith('127.0.0.1:'))
      ? RedisStore.connectCluster(seeds.split(','))
      : redisUrl?.startsWith('redis://127.0.0.1:')
        ? RedisStore.connect(redisUrl)
        : undefined;
  if (store === undefined) {
    throw new Error(`usage: quota-server.ts redis://127.0.0.1:<port> | --cluster 127.0.0.1:<port>,... (loopback only), got ${process.argv.slice(2).join(' ')}`);
  }
  // As main.ts does: no decisions before Redis has answered (calls before that get UNAVAILABLE).
  await store.ready();
  // Every decision counted as src/main.ts counts it: production pays for its metrics on each decision,
  // so the bench does too (nobody scrapes here; the scrape-time work is not per decision).
  const metrics = new QuotaMetrics();
  const engine = new QuotaEngine(parsePolicies(BENCH_POLICIES_YAML, 'bench policies'), store, {
    // As main.ts serves a Redis store: every decision checks this replica's view of the runtime overrides.
    overrides: new RedisOverrides(store.client),
    onDecision: (policy, decision, seconds) => metrics.decided(policy, decision, seconds),
  });
  // As main.ts serves Envoy's rate limit service: its default budget, headers on, every decision counted.
  const rlsConfig = parseRlsConfig(new Map([['bench.yaml', BENCH_RLS_YAML]]));
  const rlsMetrics = new RlsMetrics(metrics.registry);
  const server = await startQuotaServer({
    engine,
    address: '127.0.0.1:0',
    logger: createLogger('silent'),
    rls: {
      config: () => rlsConfig,
      timeoutMs: 10,
      shadowMode: false,
      rateLimitHeaders: true,
      onDecision: (decision, seconds) => rlsMetrics.decided(decision, seconds),
    },
  });
  serveUntilParentLeaves(server.port, async () => {
    await server.shutdown(1_000);
    await store.close();
  });
}

main().catch(failStart);
