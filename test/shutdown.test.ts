import { createChannel, createClient } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterEach, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import { startRedisServer, type RedisServer } from './support/redis-server.js';
import { startServiceProcess, untilServing } from './support/service-process.js';

/**
 * Readiness and shutdown on a real service process: SIGTERM turns health
 * NOT_SERVING, lets the call in flight finish (here: one waiting on a frozen
 * Redis), and closes Redis only after it.
 */
let redis: RedisServer | undefined;
afterEach(async () => {
  redis?.signal('SIGCONT');
  await redis?.stop();
  redis = undefined;
});

describe('readiness and shutdown of the service process', () => {
  it('SIGTERM: health NOT_SERVING, the in-flight call finishes from the store, then Redis is closed and the process exits 0', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({
      QUOTA_REDIS_URL: redis.url,
      QUOTA_LOG_LEVEL: 'debug',
      // Long enough that the frozen store does not trip the failure mode during the drain.
      QUOTA_STORE_TIMEOUT_MS: '20000',
      QUOTA_SHUTDOWN_GRACE_MS: '20000',
    });
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    await untilServing(channel, 'quota.v1.QuotaService');
    const client = createClient(QuotaServiceDefinition, channel);
    const health = createClient(HealthDefinition, channel);
    expect((await client.allow({ policy: 'orders', identity: { user: 'drain' } })).source).toBe(DecisionSource.DECISION_SOURCE_STORE);

    redis.signal('SIGSTOP');
    const inFlight = client.allow({ policy: 'orders', identity: { user: 'drain' }, requestId: 'in-flight-1' });
    await service.logged(/"requestId":"in-flight-1".*"msg":"call started"/);

    // NOT_SERVING is set before the server stops taking new calls; grpc-js may
    // already refuse the health call itself (GOAWAY), which a probe reads as down too.
    service.signal('SIGTERM');
    await service.logged(/"msg":"shutting down: draining calls"/);
    const status = await health.check({ service: '' }).then(
      (r) => r.status,
      () => 'refused',
    );
    // Either the health answer on the still-open connection, or a refused new call: never SERVING.
    expect(status === 2 || status === 'refused').toBe(true);

    redis.signal('SIGCONT');
    const response = await inFlight;
    expect(response).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_STORE });
    expect(await service.exit).toBe(0);
    const { stdout } = service.output();
    const finished = stdout.indexOf('"requestId":"in-flight-1"', stdout.indexOf('"msg":"shutting down'));
    const closed = stdout.indexOf('"msg":"calls drained, store closed: stopped"');
    expect(finished).toBeGreaterThan(0);
    expect(closed).toBeGreaterThan(finished);
    channel.close();
  });

  it('SIGTERM with a call that outlives the grace period: the call is cut, the process still exits 0 in time', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({
      QUOTA_REDIS_URL: redis.url,
      QUOTA_LOG_LEVEL: 'debug',
      QUOTA_STORE_TIMEOUT_MS: '20000',
      QUOTA_SHUTDOWN_GRACE_MS: '300',
    });
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    const client = createClient(QuotaServiceDefinition, channel);
    redis.signal('SIGSTOP');
    const inFlight = client.allow({ policy: 'orders', identity: { user: 'cut' }, requestId: 'too-slow' }).then(
      () => 'answered',
      () => 'cut',
    );
    await service.logged(/"requestId":"too-slow".*"msg":"call started"/);
    const sentAt = Date.now();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
    // Grace 300 ms plus closing a client to a frozen Redis (quit, then disconnect) and process exit.
    expect(Date.now() - sentAt).toBeLessThan(5_000);
    expect(await inFlight).toBe('cut');
    channel.close();
  });
});
