import { createServer, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { closedPort } from '../../support/closed-port.js';
import { jsonLines, quotactl } from '../../support/quotactl.js';
import { freePort, type RedisServer, startRedisServer } from '../../support/redis-server.js';
import { writeFixturePolicies } from './fixture-policies.js';
import { useServiceProcess } from './service.js';

// quotactl health against a real service process whose Redis is not there
// yet (NOT_SERVING), then is (SERVING); and quotactl's words when there is no
// service to answer at all.

const policies = writeFixturePolicies();
let redisPort = 0;
let redis: RedisServer | undefined;
afterAll(async () => {
  policies.remove();
  await redis?.stop();
});
const service = useServiceProcess(() => ({ QUOTA_POLICIES: policies.path, QUOTA_REDIS_URL: `redis://127.0.0.1:${redisPort}` }));
// The port Redis will listen on, before the service starts (useServiceProcess's env runs in its beforeAll).
redisPort = await freePort();
const run = (args: readonly string[], env: Record<string, string> = {}) => quotactl(args, { env: { QUOTACTL_ADDR: service.address(), ...env } });

describe('quotactl health', () => {
  it('NOT_SERVING (exit 1) while the store cannot be reached, SERVING (exit 0) for every name once it can', async () => {
    const before = await run(['health']);
    expect(before.stderr).toBe('');
    expect(before.code).toBe(1);
    const rows = before.stdout.trimEnd().split('\n');
    expect(rows.map((r) => r.split(/\s{2,}/))).toEqual([
      ['SERVICE', 'STATUS'],
      ["'' (the server)", 'NOT_SERVING'],
      ['quota.v1.QuotaService', 'NOT_SERVING'],
      ['envoy.service.ratelimit.v3.RateLimitService', 'NOT_SERVING'],
    ]);

    redis = await startRedisServer({ port: redisPort });
    await service.process().logged(/health SERVING/);
    const after = await run(['--json', 'health']);
    expect(after.code).toBe(0);
    expect(jsonLines(after.stdout)).toEqual([
      {
        services: [
          { service: '', status: 'SERVING' },
          { service: 'quota.v1.QuotaService', status: 'SERVING' },
          { service: 'envoy.service.ratelimit.v3.RateLimitService', status: 'SERVING' },
        ],
      },
    ]);
    const one = await run(['health', '--service', 'quota.v1.QuotaService']);
    expect(one.code).toBe(0);
    expect(
      one.stdout
        .trimEnd()
        .split('\n')[1]!
        .split(/\s{2,}/),
    ).toEqual(['quota.v1.QuotaService', 'SERVING']);
  });

  it('a service that takes longer than --timeout (its Redis frozen): DEADLINE_EXCEEDED saying it did not answer', async () => {
    // The service waits QUOTA_STORE_TIMEOUT_MS (2 s in tests) for a silent store: longer than quotactl's 300 ms.
    expect((await run(['allow', 'daily', 'user=slow-1'])).code).toBe(0);
    redis!.signal('SIGSTOP');
    try {
      const slow = await run(['--timeout', '300', 'allow', 'daily', 'user=slow-1']);
      expect(slow).toMatchObject({
        code: 3,
        stderr: `quotactl: DEADLINE_EXCEEDED: the service at ${service.address()} did not answer within 300 ms (--timeout 300)\n`,
      });
    } finally {
      redis!.signal('SIGCONT');
    }
  });

  it('a name the service does not serve: SERVICE_UNKNOWN, exit 5', async () => {
    const unknown = await run(['health', '--service', 'no.such.Service']);
    expect(unknown.code).toBe(5);
    expect(
      unknown.stdout
        .trimEnd()
        .split('\n')[1]!
        .split(/\s{2,}/),
    ).toEqual(['no.such.Service', 'SERVICE_UNKNOWN']);
  });

  it('no service there: exit 3, saying the connection was refused in words', async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const refused = `quotactl: UNAVAILABLE: the service at ${address} could not be reached: connection refused (is the service running and listening on that address?)\n`;
    // Every command says it so, not only health.
    expect(await quotactl(['allow', 'daily', 'user=1'], { env: { QUOTACTL_ADDR: address } })).toMatchObject({ code: 3, stdout: '', stderr: refused });
    expect(await quotactl(['health'], { env: { QUOTACTL_ADDR: address } })).toMatchObject({ code: 3, stdout: '', stderr: refused });
  });

  it('a listener that never speaks gRPC: exit 3, DEADLINE_EXCEEDED saying no connection was made within --timeout', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = `127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const stderr = `quotactl: DEADLINE_EXCEEDED: could not connect to the service at ${address} within 300 ms (--timeout 300): is the address right, and the service up?\n`;
      expect(await quotactl(['--timeout', '300', 'allow', 'daily', 'user=1'], { env: { QUOTACTL_ADDR: address } })).toMatchObject({ code: 3, stderr });
      expect(await quotactl(['--timeout', '300', 'health'], { env: { QUOTACTL_ADDR: address } })).toMatchObject({ code: 3, stderr });
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
