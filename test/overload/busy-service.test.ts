import { DecisionSource, type AllowRequest } from '@quota-service/contract';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { createLogger } from '../../src/logger.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { openAllowStream } from '../support/allow-stream-probe.js';
import { useRedisServer } from '../support/use-redis.js';
import { awayFromMinuteEnd } from '../support/window-edge.js';

/**
 * Failure modes are for a store that is down, not for a service or a store
 * that is busy: hostile load against a healthy Redis, with the service's
 * shipped settings (50 ms store budget, breaker after 5 failures), never
 * grants past a limit, and other callers' decisions keep coming from the store.
 */
const redis = useRedisServer();
const config = loadConfig({});
let service: TestService;

beforeAll(async () => {
  const failure = new StoreFailurePolicy({
    timeoutMs: config.QUOTA_STORE_TIMEOUT_MS,
    breakerFailures: config.QUOTA_BREAKER_FAILURES,
    halfOpenAfterMs: config.QUOTA_BREAKER_HALF_OPEN_MS,
    logger: createLogger('silent'),
  });
  service = await startTestService(RedisStore.connect(redis().url), undefined, { failure });
});
afterAll(async () => {
  await service?.stop();
});

const user = (id: string): AllowRequest => ({ policy: 'user', identity: { user: id }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });

describe('a busy service on a healthy Redis', () => {
  it('eight concurrent AllowBatch calls of 1000 requests for one user of a 120/min fail_open policy allow exactly 120; a bystander stays on the store', async () => {
    // The policy's window is a minute: all of the requests fall in one.
    await awayFromMinuteEnd();
    const batches = Array.from({ length: 8 }, () => service.client.allowBatch({ requests: Array.from({ length: 1000 }, () => user('hog')) }));
    const bystander = (async () => {
      const sources: DecisionSource[] = [];
      for (let i = 0; i < 20; i++) {
        const answer = await service.client.allow({
          policy: 'orders',
          identity: { user: `bystander-${i}` },
          cost: 0,
          requestId: '',
          deadlineMs: 0,
          sentAtUnixMs: 0,
        });
        sources.push(answer.source);
      }
      return sources;
    })();
    const answers = (await Promise.all(batches)).flatMap((batch) => batch.results);
    const allowed = answers.filter((result) => result.response?.allowed === true).length;
    const fromFailureMode = answers.filter((result) => result.response !== undefined && result.response.source !== DecisionSource.DECISION_SOURCE_STORE);
    expect(fromFailureMode).toHaveLength(0);
    expect(allowed).toBe(120);
    expect(new Set(await bystander)).toEqual(new Set([DecisionSource.DECISION_SOURCE_STORE]));
  });

  it('one AllowStream carrying eight batches of 1000 requests for one user allows exactly 120, all from the store', async () => {
    await awayFromMinuteEnd();
    const stream = openAllowStream(service.client);
    for (let id = 1; id <= 8; id++)
      stream.send(
        id,
        Array.from({ length: 1000 }, () => user('streamer')),
      );
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => stream.answer(i + 1)));
    stream.end();
    expect(await stream.ended).toBe('OK');
    const results = answers.flatMap((answer) => answer.results);
    expect(results.filter((result) => result.response?.source !== DecisionSource.DECISION_SOURCE_STORE)).toHaveLength(0);
    expect(results.filter((result) => result.response?.allowed === true)).toHaveLength(120);
  });
});
