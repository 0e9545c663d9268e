import { afterAll, describe, expect, it } from 'vitest';
import { DecisionSource } from '@quota-service/contract';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';

describe('store trouble', () => {
  let redis: RedisServer | undefined;
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.stop();
    await redis?.stop();
  });

  it('Redis gone: the failure mode decides, no gRPC error, no crash; back again (no decide library, no state): the store loads the library and decides', async () => {
    redis = await startRedisServer();
    const port = redis.port;
    const store = RedisStore.connect(redis.url);
    service = await startTestService(store);
    // orders fails over to a local limiter (config/policies.yaml); ip fails open.
    const orders = () => service!.client.allow({ policy: 'orders', identity: { user: 'u' } });
    expect(await orders()).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_STORE });

    await redis.stop();
    const local = await orders();
    // The local limiter has half the bucket (capacity 5) and starts full.
    expect(local).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_LOCAL, limits: [{ name: 'orders', limit: 5, remaining: 4 }] });
    const open = await service.client.allow({ policy: 'ip', identity: { ip: '203.0.113.9' } });
    expect(open).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_FAIL_OPEN, limits: [] });

    // A new Redis on the same port holds no library: the first FCALL meets "Function not found",
    // the store loads the library there and sends the call again.
    redis = await startRedisServer({ port });
    const deadline = Date.now() + 10_000;
    let response;
    while (response?.source !== DecisionSource.DECISION_SOURCE_STORE && Date.now() < deadline) {
      response = await orders();
      if (response.source !== DecisionSource.DECISION_SOURCE_STORE) await new Promise((r) => setTimeout(r, 50));
    }
    // The store decides again: the new Redis holds no state, so a full global bucket (10), not the local one (5).
    expect(response).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_STORE, limits: [{ limit: 10, remaining: 9 }] });
    const admin = redis.client();
    const stats = await admin.info('commandstats');
    admin.disconnect();
    // Refused once, then run: still FCALL of the library, never the script.
    expect(Number(/^cmdstat_fcall:calls=(\d+),.*failed_calls=(\d+)/m.exec(stats)?.[2])).toBe(1);
    expect(Number(/^cmdstat_fcall:calls=(\d+)/m.exec(stats)?.[1])).toBeGreaterThanOrEqual(2);
    expect(stats).not.toMatch(/^cmdstat_(eval|evalsha):/m);
    expect(store.parts.decideCommand().command).toBe('FCALL');
  });
});
