import { ClientError, Status } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/store/redis.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';

describe('store trouble', () => {
  let redis: RedisServer | undefined;
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.stop();
    await redis?.stop();
  });

  it('Redis gone: UNAVAILABLE with a plain message, no crash; back again (empty script cache): decisions resume', async () => {
    redis = await startRedisServer();
    const port = redis.port;
    const store = RedisStore.connect(redis.url);
    service = await startTestService(store);
    const allow = () => service!.client.allow({ policy: 'orders', identity: { user: 'u' } });
    expect((await allow()).allowed).toBe(true);

    await redis.stop();
    const error = await allow().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).code).toBe(Status.UNAVAILABLE);
    expect((error as ClientError).details).toBe('quota store unavailable');

    // A new Redis on the same port knows no scripts: EVALSHA falls back to EVAL.
    redis = await startRedisServer({ port });
    const deadline = Date.now() + 10_000;
    let response;
    while (response === undefined && Date.now() < deadline) {
      response = await allow().catch(() => undefined);
      if (response === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    expect(response).toMatchObject({ allowed: true, limits: [{ remaining: 9 }] });
  });
});
