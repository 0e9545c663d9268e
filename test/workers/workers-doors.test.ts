import { writeFileSync } from 'node:fs';
import { ChannelCredentials, ClientError, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OverrideMatch, QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import { listedServices } from '../support/reflection.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { rlsClient, rlsConfigDir } from '../support/rls-client.js';
import { startServiceProcess } from '../support/service-process.js';
import { createTestCertificates, LOOPBACK_SERVER } from '../support/test-certificates.js';
import { answeredBy, ownConnection, sharedBucketPolicies, twoReadyWorkers } from '../support/worker-processes.js';

const APP_TOKEN = 'app-token-4b8c1d2e3f405162';
const SUPPORT_TOKEN = 'support-token-9a8b7c6d5e4f3a2b';
const CALLERS = `callers:
  app:
    token: ${APP_TOKEN}
    policies: [shared]
    domains: [edge]
  support:
    token: ${SUPPORT_TOKEN}
    policies: ['*']
    roles: [admin]
`;
const RLS = 'domain: edge\ndescriptors:\n  - key: path\n    limit: { algorithm: token_bucket, capacity: 1000, refill_per_second: 1 }\n';

const bearer = (token: string) => ({ metadata: Metadata({ authorization: `Bearer ${token}` }) });
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'OK',
    (error: unknown) => (error instanceof ClientError ? Status[error.code] : `not a gRPC error: ${String(error)}`),
  );

/**
 * Every door on every worker: a QUOTA_WORKERS=2 service with TLS and caller tokens, asked over
 * four connections (the primary hands two to each worker) for health, reflection,
 * Allow with and without a token, Envoy's ShouldRateLimit and the admin API, whose override
 * set through one connection holds on all.
 */
describe('QUOTA_WORKERS=2: every door on every worker', { timeout: 90_000 }, () => {
  const certificates = createTestCertificates();
  let redis: RedisServer;
  const channels: Channel[] = [];
  beforeAll(async () => {
    certificates.authority('ca');
    certificates.issue('server', 'ca', LOOPBACK_SERVER);
    writeFileSync(certificates.file('callers.yaml'), CALLERS);
    redis = await startRedisServer();
  });
  afterAll(async () => {
    for (const channel of channels) channel.close();
    await redis.stop();
    certificates.remove();
  });

  it('TLS, tokens, health, reflection, Allow, ShouldRateLimit and the admin API answer alike on both workers', async () => {
    const service = startServiceProcess({
      QUOTA_WORKERS: '2',
      QUOTA_REDIS_URL: redis.url,
      QUOTA_POLICIES: sharedBucketPolicies(),
      QUOTA_RLS_CONFIG: rlsConfigDir({ 'edge.yaml': RLS }),
      QUOTA_TLS_CERT: certificates.file('server.crt'),
      QUOTA_TLS_KEY: certificates.file('server.key'),
      QUOTA_AUTH_TOKENS: certificates.file('callers.yaml'),
      QUOTA_LOG_LEVEL: 'debug',
    });
    const workers = await twoReadyWorkers(service);
    const port = await service.port;
    const tls = ChannelCredentials.createSsl(certificates.pem('ca.crt'));
    const pids = new Set<number>();
    for (let i = 0; i < 4; i++) {
      const channel = ownConnection(port, channels, tls);
      expect((await createClient(HealthDefinition, channel).check({ service: 'quota.v1.QuotaService' })).status).toBe(1);
      const quota = createClient(QuotaServiceDefinition, channel);
      expect(await codeOf(quota.allow({ policy: 'shared', identity: { user: 'u' } }))).toBe('UNAUTHENTICATED');
      expect((await quota.allow({ policy: 'shared', identity: { user: `u${i}` }, requestId: `doors-${i}` }, bearer(APP_TOKEN))).allowed).toBe(true);
      pids.add(await answeredBy(service, `doors-${i}`));
      expect(await codeOf(quota.allow({ policy: 'shared', identity: { user: 'u' } }, bearer('unknown-token-0000000000')))).toBe('UNAUTHENTICATED');

      expect(await listedServices(channel)).toEqual(
        expect.arrayContaining(['quota.v1.QuotaService', 'quota.v1.QuotaAdminService', 'envoy.service.ratelimit.v3.RateLimitService']),
      );
    }
    expect([...pids].sort()).toEqual([...workers].sort());

    // Envoy's door, on each worker's connection.
    for (let i = 0; i < 2; i++) {
      const rls = rlsClient(`127.0.0.1:${port}`, tls);
      const answer = await rls.shouldRateLimit(
        { domain: 'edge', descriptors: [{ entries: [{ key: 'path', value: '/a' }] }], hits_addend: 1 },
        { authorization: `Bearer ${APP_TOKEN}` },
      );
      expect(answer.overall_code).toBe('OK');
      rls.close();
    }

    // An override set through one connection limits the calls through every other one: it lives in Redis.
    const admin = createClient(QuotaAdminServiceDefinition, channels[0]!);
    await admin.setOverride(
      {
        key: { limit: 'shared', match: OverrideMatch.OVERRIDE_MATCH_EXACT, value: 'vip' },
        parameters: { tokenBucket: { capacity: 3, refillPerSecond: 0 } },
        ttlMs: 600_000,
        reason: 'test',
      },
      bearer(SUPPORT_TOKEN),
    );
    let allowed = 0;
    for (let i = 0; i < 8; i++) {
      if ((await createClient(QuotaServiceDefinition, channels[i % 4]!).allow({ policy: 'shared', identity: { user: 'vip' } }, bearer(APP_TOKEN))).allowed)
        allowed++;
    }
    expect(allowed).toBe(3);
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });
});
