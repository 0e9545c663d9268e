import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { d, type RlsClient, rlsClient, rlsConfigDir } from '../../support/rls-client.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service-process.js';
import { awayFromMinuteEnd } from '../../support/window-edge.js';

/**
 * 200 ShouldRateLimit calls at once for one address with 3 per minute,
 * spread over 3 service processes on one Redis: exactly 3 are OK, because
 * each decision is one atomic script on Redis's clock. (The minute window
 * is the one the calls fall in: a call is repeated in the next minute only
 * if the 200 straddle a minute boundary, which the test avoids by starting
 * early in a minute.)
 */
const REPLICAS = 3;
const CALLS = 200;

let redis: RedisServer;
let services: ServiceProcess[] = [];
let clients: RlsClient[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  const config = rlsConfigDir({
    'edge.yaml': 'domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: minute\n      requests_per_unit: 3\n',
  });
  services = Array.from({ length: REPLICAS }, () =>
    startServiceProcess({ QUOTA_REDIS_URL: redis.url, QUOTA_RLS_CONFIG: config, QUOTA_RLS_STORE_TIMEOUT_MS: '20000' }),
  );
  const ports = await Promise.all(services.map((s) => s.port));
  await Promise.all(services.map((s) => s.logged(/health SERVING/)));
  clients = ports.map((port) => rlsClient(`127.0.0.1:${port}`));
}, 60_000);

afterAll(async () => {
  for (const client of clients) client.close();
  for (const service of services) service.signal('SIGKILL');
  await Promise.all(services.map((s) => s.exit));
  await redis?.stop();
});

describe('replicas share one limit through Redis', () => {
  it(`${CALLS} simultaneous calls for one address over ${REPLICAS} replicas: exactly 3 OK`, async () => {
    // Not in a minute's last 10 s (the calls take well under that), so that they all fall in one window.
    await awayFromMinuteEnd();
    const responses = await Promise.all(
      Array.from({ length: CALLS }, (_, i) => clients[i % REPLICAS]!.shouldRateLimit({ domain: 'edge', descriptors: [d(['remote_address', '203.0.113.7'])] })),
    );
    const ok = responses.filter((r) => r.overall_code === 'OK');
    expect(ok).toHaveLength(3);
    expect(responses.filter((r) => r.overall_code === 'OVER_LIMIT')).toHaveLength(CALLS - 3);
    expect(ok.map((r) => r.statuses[0]!.limit_remaining).sort()).toEqual([0, 1, 2]);
    const inspector = redis.client();
    const count = await inspector.hget('rl:v1:rls:edge:rule:remote_address:fixed_window:{remote_address=203.0.113.7}:minute', 'c');
    inspector.disconnect();
    expect(Number(count)).toBe(3);
  }, 90_000);
});
