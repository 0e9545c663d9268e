import { getEventListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { VirtualClock } from '@quota-service/core';
import { createLogger } from '../../src/logger.js';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { createQuotaClient, QuotaInvalidArgumentError, type QuotaClient, type QuotaClientOptions } from '@quota-service/client';
import { closedPort } from '../support/closed-port.js';
import { HangingStore } from '../support/hanging-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { T0 } from '../support/store-fixtures.js';

const clients: QuotaClient[] = [];
const connect = (options: QuotaClientOptions) => {
  const client = createQuotaClient(options);
  clients.push(client);
  return client;
};
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

/** A store budget longer than any client deadline here, so the service itself never answers first. */
const patientFailurePolicy = () => new StoreFailurePolicy({ timeoutMs: 600_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });

const LOCAL_POLICIES = `
policies:
  orders:
    limits:
      - { name: orders, key_by: user, algorithm: token_bucket, capacity: 2, refill_per_second: 1 }
`;

describe('nothing listens on the port (connection refused)', () => {
  it.each([
    ['unary', false],
    ['batching', undefined],
  ] as const)('%s: fail_open allows, fail_closed denies, each saying so in source', async (_mode, batch) => {
    const address = `127.0.0.1:${await closedPort()}`;
    const open = connect({ address, batch, onUnavailable: 'fail_open', deadlineMs: 5_000 });
    const closed = connect({ address, batch, onUnavailable: 'fail_closed', failClosedRetryAfterMs: 2_000, deadlineMs: 5_000 });
    const ask = { policy: 'orders', identity: { user: 'u' } };
    const [a, b] = await Promise.all([open.allow(ask), open.allow(ask)]);
    expect(a).toEqual({ allowed: true, retryAfterMs: 0, deniedBy: '', limits: [], delayMs: 0, source: 'fail_open' });
    expect(b).toEqual(a);
    expect(await closed.allow(ask)).toEqual({ allowed: false, retryAfterMs: 2_000, deniedBy: '', limits: [], delayMs: 0, source: 'fail_closed' });
  });

  it('the default policy is fail_closed', async () => {
    const client = connect({ address: `127.0.0.1:${await closedPort()}` });
    expect(await client.allow({ policy: 'orders', identity: { user: 'u' } })).toMatchObject({ allowed: false, source: 'fail_closed', retryAfterMs: 1_000 });
  });

  it('local: the per-process limit decides with the embedded models; other policies get `otherwise`; bad input still rejects', async () => {
    const clock = new VirtualClock(T0);
    const client = connect({
      address: `127.0.0.1:${await closedPort()}`,
      deadlineMs: 5_000,
      onUnavailable: { local: { policies: LOCAL_POLICIES, otherwise: 'fail_open', clock } },
    });
    const order = () => client.allow({ policy: 'orders', identity: { user: 'u' } });
    expect(await order()).toMatchObject({ allowed: true, source: 'local', limits: [{ name: 'orders', limit: 2, remaining: 1 }] });
    expect(await order()).toMatchObject({ allowed: true, source: 'local', limits: [{ remaining: 0 }] });
    expect(await order()).toMatchObject({ allowed: false, source: 'local', deniedBy: 'orders', retryAfterMs: 1_000 });
    clock.advance(1_000);
    expect(await order()).toMatchObject({ allowed: true, source: 'local' });
    expect(await client.allow({ policy: 'user', identity: { user: 'u' } })).toMatchObject({ allowed: true, source: 'fail_open' });
    await expect(client.allow({ policy: 'orders', identity: { user: 'u' }, cost: -1 })).rejects.toBeInstanceOf(QuotaInvalidArgumentError);
  });

  it('a bad local policy document fails when the client is created', () => {
    expect(() =>
      createQuotaClient({
        address: '127.0.0.1:1',
        onUnavailable: {
          local: { policies: 'policies: { orders: { limits: [ { name: o, key_by: user, algorithm: token_bucket, capacity: 0, refill_per_second: 1 } ] } }' },
        },
      }),
    ).toThrow(/onUnavailable\.local\.policies: invalid policies:\n\s+policies\.orders\.limits\[0\]\.capacity/);
  });
});

describe('the service takes longer than the deadline (its store never answers)', () => {
  const store = new HangingStore();
  let service: TestService | undefined;
  afterAll(async () => {
    await store.close();
    await service?.stop();
  });

  it.each([
    ['unary', false],
    ['batching', undefined],
  ] as const)('%s: after deadlineMs the failure policy answers, every caller on its own', async (_mode, batch) => {
    service ??= await startTestService(store, undefined, { failure: patientFailurePolicy() });
    // Long enough for the calls to reach the server on a busy machine (asserted below), short enough to wait for.
    const deadlineMs = 1_000;
    const client = connect({ address: `127.0.0.1:${service.server.port}`, batch, deadlineMs, onUnavailable: 'fail_open' });
    const asked = store.asked;
    const started = performance.now();
    const decisions = await Promise.all(Array.from({ length: 5 }, (_, i) => client.allow({ policy: 'orders', identity: { user: `d${i}` } })));
    const elapsed = performance.now() - started;
    expect(decisions.map((d) => d.source)).toEqual(Array(5).fill('fail_open'));
    // The calls did reach the service: it is the deadline that answered, not a refused connection.
    expect(store.asked - asked).toBe(5);
    // Timers never fire early; the upper bound is loose on purpose (shared machine).
    expect(elapsed).toBeGreaterThanOrEqual(deadlineMs - 1);
    expect(elapsed).toBeLessThan(deadlineMs + 3_000);
  });

  it.each([
    ['unary', false],
    ['batching', undefined],
  ] as const)("%s: a caller's signal rejects only the calls that carry it, with its reason, and leaves no listener behind", async (_mode, batch) => {
    service ??= await startTestService(store, undefined, { failure: patientFailurePolicy() });
    const client = connect({ address: `127.0.0.1:${service.server.port}`, batch, deadlineMs: 60_000, onUnavailable: 'fail_open' });
    const a = new AbortController();
    const b = new AbortController();
    const c = new AbortController();
    const asked = store.asked;
    // One batch (or five Allow RPCs): three calls share signal a, one has b, one a short deadline of its own (and c).
    const withA = [0, 1, 2].map((i) => client.allow({ policy: 'orders', identity: { user: `sa${i}` } }, { signal: a.signal }));
    const withB = client.allow({ policy: 'orders', identity: { user: 'sb' } }, { signal: b.signal });
    const shortDeadline = client.allow({ policy: 'orders', identity: { user: 'sd' } }, { deadlineMs: 300, signal: c.signal });
    let bSettled = false;
    void withB.finally(() => (bSettled = true)).catch(() => {});
    // In flight: the service holds them (its store never answers).
    await vi.waitFor(() => expect(store.asked).toBeGreaterThan(asked), { timeout: 10_000 });
    const reasonA = new Error('caller a gave up');
    a.abort(reasonA);
    for (const call of withA) await expect(call).rejects.toBe(reasonA);
    expect(getEventListeners(a.signal, 'abort')).toHaveLength(0);
    // The others keep their own deadline and signal.
    expect(await shortDeadline).toMatchObject({ source: 'fail_open' });
    expect(getEventListeners(c.signal, 'abort')).toHaveLength(0);
    expect(bSettled).toBe(false);
    expect(getEventListeners(b.signal, 'abort')).toHaveLength(1);
    const reasonB = new Error('caller b gave up');
    b.abort(reasonB);
    await expect(withB).rejects.toBe(reasonB);
    expect(getEventListeners(b.signal, 'abort')).toHaveLength(0);
  });

  it.each([
    ['unary', false],
    ['batching', undefined],
  ] as const)('%s: an already aborted signal rejects at once with its reason', async (_mode, batch) => {
    service ??= await startTestService(store, undefined, { failure: patientFailurePolicy() });
    const client = connect({ address: `127.0.0.1:${service.server.port}`, batch, deadlineMs: 60_000, onUnavailable: 'fail_open' });
    const reason = new Error('gave up before asking');
    const asked = store.asked;
    await expect(client.allow({ policy: 'orders', identity: { user: 'early' } }, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(store.asked).toBe(asked);
  });

  it.each([
    ['unary', false],
    ['batching', undefined],
  ] as const)('%s: the warning says the deadline passed, once for three calls', async (_mode, batch) => {
    service ??= await startTestService(store, undefined, { failure: patientFailurePolicy() });
    const lines: Array<{ msg: string; reason?: string }> = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const client = connect({ address: `127.0.0.1:${service.server.port}`, batch, deadlineMs: 200, onUnavailable: 'fail_open', logger });
    await Promise.all([1, 2, 3].map((i) => client.allow({ policy: 'orders', identity: { user: `w${i}` } })));
    expect(lines.map((l) => [l.msg, l.reason])).toEqual([['quota service unavailable: the failure policy answers', 'deadline exceeded']]);
  });

  it('a per-call deadline overrides the client default', async () => {
    service ??= await startTestService(store, undefined, { failure: patientFailurePolicy() });
    const client = connect({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 60_000, onUnavailable: 'fail_closed' });
    const started = performance.now();
    expect(await client.allow({ policy: 'orders', identity: { user: 'p' } }, { deadlineMs: 200 })).toMatchObject({ source: 'fail_closed' });
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe("the service is up but its Redis is down: the service's failure mode answers", () => {
  let redis: RedisServer | undefined;
  let service: TestService | undefined;
  let store: RedisStore | undefined;
  afterAll(async () => {
    await service?.stop();
    await store?.close();
    await redis?.stop();
  });

  it("the client passes the service's decision and its source on, for single and batched calls", async () => {
    redis = await startRedisServer();
    store = RedisStore.connect(redis.url);
    service = await startTestService(store);
    const client = connect({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000, onUnavailable: 'fail_open' });
    expect(await client.allow({ policy: 'orders', identity: { user: 'r' } })).toMatchObject({ allowed: true, source: 'store' });
    await redis.stop();
    // The shipped `orders` policy fails over to the service's local share; the
    // client's own onUnavailable is for a service that cannot answer at all.
    expect(await client.allow({ policy: 'orders', identity: { user: 'r' } })).toMatchObject({ allowed: true, source: 'local' });
    const batched = await Promise.all([1, 2, 3].map((i) => client.allow({ policy: 'orders', identity: { user: `r${i}` } })));
    expect(batched.map((d) => d.source)).toEqual(['local', 'local', 'local']);
  });
});
