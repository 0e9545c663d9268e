import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition, type QuotaServiceClient } from '@quota-service/contract';
import type { RedisCluster } from '../../support/redis-cluster.js';
import type { RedisServer } from '../../support/redis-server.js';
import { d, type RlsClient, rlsClient, rlsConfigDir } from '../../support/rls-client.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../../support/service-process.js';
import { useRedisCluster, useRedisServer } from '../../support/use-redis.js';

/**
 * The same decisions through both doors of one real service process: for the
 * same limit, the same sequence of costs gets the same answers and the same
 * remaining through ShouldRateLimit (per-descriptor hits_addend, a client
 * built from Envoy's protos) as through Allow (cost), on the embedded store,
 * a single Redis and a 3+3 Redis Cluster. Real time: the limits refill too
 * slowly, and their windows are too long, for the milliseconds between the
 * two calls of a step to change an answer (rls-same-as-allow.test.ts holds
 * the algorithms equal on a virtual clock).
 */
const LIMITS: [string, string][] = [
  ['token_bucket', 'algorithm: token_bucket, capacity: 6, refill_per_second: 0.0001'],
  ['fixed_window', 'algorithm: fixed_window, limit: 6, window: 1d'],
  ['gcra', 'algorithm: gcra, capacity: 5, refill_per_second: 0.0001'],
  ['sliding_window_log', 'algorithm: sliding_window_log, limit: 5, window: 1d'],
  ['sliding_window_counter', 'algorithm: sliding_window_counter, limit: 5, window: 1d'],
  ['leaky_bucket', 'algorithm: leaky_bucket, capacity: 5, leak_per_second: 0.0001'],
];

const redis = useRedisServer();
const cluster = useRedisCluster();
const stores: [string, () => Record<string, string>][] = [
  ['embedded store', () => ({})],
  ['single Redis', () => ({ QUOTA_REDIS_URL: (redis() as RedisServer).url })],
  ['Redis Cluster', () => ({ QUOTA_REDIS_CLUSTER: (cluster() as RedisCluster).seeds.join(',') })],
];

function configs(): { policies: string; rls: string } {
  let policies = 'policies:\n';
  let rls = 'domain: same\ndescriptors:\n';
  for (const [name, limit] of LIMITS) {
    policies += `  ${name}:\n    limits:\n      - { name: ${name.replaceAll('_', '-')}, key_by: user, ${limit} }\n`;
    // The policy file's window names; the RLS file's windows are lengths such as 1d.
    rls += `  - key: ${name}\n    limit: { ${limit} }\n`;
  }
  const rlsDir = rlsConfigDir({ 'same.yaml': rls });
  const policyFile = join(rlsConfigDir({}), 'policies.yaml');
  writeFileSync(policyFile, policies.replaceAll('window: 1d', 'window: day'));
  return { policies: policyFile, rls: rlsDir };
}

describe.each(stores)('ShouldRateLimit decides as Allow, over gRPC, on the %s', (_name, env) => {
  let service: ServiceProcess;
  let channel: Channel;
  let quota: QuotaServiceClient;
  let rls: RlsClient;
  beforeAll(async () => {
    const { policies, rls: rlsDir } = configs();
    service = startServiceProcess({ QUOTA_POLICIES: policies, QUOTA_RLS_CONFIG: rlsDir, QUOTA_RLS_STORE_TIMEOUT_MS: '2000', ...env() });
    const port = await service.port;
    channel = createChannel(`127.0.0.1:${port}`);
    await untilServing(channel, 'quota.v1.QuotaService');
    quota = createClient(QuotaServiceDefinition, channel);
    rls = rlsClient(`127.0.0.1:${port}`);
  }, 60_000);
  afterAll(async () => {
    rls?.close();
    channel?.close();
    service?.signal('SIGKILL');
    await service?.exit;
  });

  let run = 0;
  it.each(LIMITS.map(([name]) => name))('%s', async (name) => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 10 }), async (costs) => {
        // A fresh identity per run: each door keeps its own state for it.
        const user = `u${run++}`;
        for (const [i, cost] of costs.entries()) {
          const allow = await quota.allow({ policy: name, identity: { user }, cost, requestId: '' });
          const answer = await rls.shouldRateLimit({ domain: 'same', descriptors: [{ ...d([name, user]), hits_addend: { value: cost } }] });
          expect({ ok: answer.overall_code === 'OK', remaining: answer.statuses[0]!.limit_remaining }, `step ${i}, cost ${cost}`).toEqual({
            ok: allow.allowed,
            remaining: Math.floor(allow.limits[0]!.remaining),
          });
        }
      }),
      { numRuns: 8 },
    );
  });
});
