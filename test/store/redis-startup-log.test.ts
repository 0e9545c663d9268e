import { afterEach, describe, expect, it } from 'vitest';
import { freePort, type RedisServer, startRedisServer } from '../support/redis-server.js';
import { type ServiceProcess, startServiceProcess } from '../support/service-process.js';

// A service whose Redis is healthy but not there for its first connection attempts
// (Redis starting a moment after the service, a connect timeout that fired late while
// the service was loading): within the start-up budget that is no error. A Redis that
// stays away is one, once the budget has passed.

let service: ServiceProcess | undefined;
let redis: RedisServer | undefined;

afterEach(async () => {
  if (service !== undefined) {
    service.signal('SIGTERM');
    const timer = setTimeout(() => service?.signal('SIGKILL'), 5_000);
    await service.exit;
    clearTimeout(timer);
    service = undefined;
  }
  await redis?.stop();
  redis = undefined;
});

const errorLines = (stdout: string) => stdout.split('\n').filter((line) => /"level":(50|60),/.test(line));

describe('connecting to Redis at start', () => {
  it('a Redis started just after the service: SERVING, and no error line', async () => {
    const port = await freePort();
    service = startServiceProcess({ QUOTA_REDIS_URL: `redis://127.0.0.1:${port}` });
    await service.port;
    // The service is listening and has been trying its Redis: refused until now.
    redis = await startRedisServer({ port });
    await service.logged(/"msg":"store ready: health SERVING"/);
    expect(errorLines(service.output().stdout), service.output().stdout).toEqual([]);
  }, 60_000);

  it('a Redis that stays away: past the start-up budget, one error line with the cause', async () => {
    const port = await freePort();
    service = startServiceProcess({ QUOTA_REDIS_URL: `redis://127.0.0.1:${port}` });
    const line = await service.logged(/"msg":"cannot connect to Redis: health stays NOT_SERVING"/);
    expect(line).toMatch(/"level":50,/);
    expect(line).toContain(`"node":"127.0.0.1:${port}"`);
    expect(line).toContain('"code":"ECONNREFUSED"');
    expect(errorLines(service.output().stdout)).toHaveLength(1);
  }, 60_000);
});
