import { ClientError, Status } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';
import { startQuotaServer } from '../../src/quota-server.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createChannel, createClient } from 'nice-grpc';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { shippedPolicies } from '../support/quota-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';

/**
 * GetQuota on a hung Redis (SIGSTOP): it keeps to the store budget and to the
 * circuit breaker as Allow does, answering UNAVAILABLE within about the
 * budget and at once while the circuit is open, never after ioredis's 1 s
 * command timeout. The budget is wide so that a loaded machine's scheduling
 * delay (tens of milliseconds) cannot be mistaken for waiting on the store.
 */
const BUDGET_MS = 250;
/** ioredis's own command timeout: a peek must never wait for it. */
const DRIVER_TIMEOUT_MS = 1_000;

describe('GetQuota while the store hangs', () => {
  let redis: RedisServer | undefined;
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    await redis?.stop();
  });

  it('answers UNAVAILABLE within the budget, and at once while the breaker is open', async () => {
    redis = await startRedisServer();
    const failure = new StoreFailurePolicy({ timeoutMs: BUDGET_MS, breakerFailures: 1, halfOpenAfterMs: 60_000, logger: createLogger('silent') });
    // The service's log, kept: an outage is a line with its cause, not a stack trace per call.
    const lines: string[] = [];
    const logger = createLogger('warn', new Writable({ write: (chunk, _encoding, done) => done(void lines.push(String(chunk))) }));
    const store = RedisStore.connect(redis.url);
    const server = await startQuotaServer({ engine: new QuotaEngine(await shippedPolicies(), store, { failure }), address: '127.0.0.1:0', logger });
    cleanups.push(() => server.shutdown(100));
    await store.ready();
    server.setServing(true);
    const channel = createChannel(`127.0.0.1:${server.port}`);
    cleanups.push(() => channel.close());
    const client = createClient(QuotaServiceDefinition, channel);
    const peek = async () => {
      const started = performance.now();
      const error = await client.getQuota({ policy: 'orders', identity: { user: 'u' } }).then(
        () => undefined,
        (reason: unknown) => reason,
      );
      return { error, ms: performance.now() - started };
    };
    expect((await peek()).error).toBeUndefined();

    redis.signal('SIGSTOP');
    try {
      // Before the breaker opens (one failure opens it here): the peek waits out the budget, not the driver's 1 s timeout.
      const hung = await peek();
      expect(hung.error).toBeInstanceOf(ClientError);
      expect((hung.error as ClientError).code).toBe(Status.UNAVAILABLE);
      expect(hung.ms).toBeGreaterThanOrEqual(BUDGET_MS - 1);
      expect(hung.ms).toBeLessThan(DRIVER_TIMEOUT_MS);
      // Open: no store call at all, so no waiting out the budget.
      const open = await peek();
      expect((open.error as ClientError).code).toBe(Status.UNAVAILABLE);
      const warnings = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'quota store unavailable');
      expect(warnings).toHaveLength(2);
      for (const warning of warnings) {
        expect(warning).toMatchObject({ method: '/quota.v1.QuotaService/GetQuota' });
        expect(JSON.stringify(warning)).not.toMatch(/stack|\n\s+at /);
      }
      expect(warnings.map((warning) => warning.cause)).toEqual([`store answered nothing for ${BUDGET_MS} ms`, 'the circuit is open']);
      expect(open.ms, `the service's log: ${lines.join('')}`).toBeLessThan(BUDGET_MS);
    } finally {
      redis.signal('SIGCONT');
    }
  });
});
