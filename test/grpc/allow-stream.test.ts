import { createChannel, createClient, Metadata, Status, type CallOptions, type ClientMiddlewareCall } from 'nice-grpc';
import { createQuotaClient, QuotaRequestError } from '@quota-service/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseCallers } from '../../src/config/callers.js';
import { ReloadableCallerRegistry } from '../../src/config/callers-watcher.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { QuotaServiceDefinition, type AllowRequest } from '@quota-service/contract';
import { allowStreamHandler, MAX_BATCHES_IN_FLIGHT, type DecideBatch } from '../../src/api/quota/allow-stream.js';
import { SemaphorePerConnection } from '../../src/api/quota/stream-semaphore.js';
import { startQuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { openAllowStream } from '../support/allow-stream-probe.js';
import { SERVING_PATHS, shippedPolicies, startTestService, type TestService } from '../support/quota-service.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();
const order = (user: string, extra: Partial<AllowRequest> = {}): AllowRequest => ({
  policy: 'orders',
  identity: { user },
  cost: 0,
  requestId: '',
  deadlineMs: 0,
  sentAtUnixMs: 0,
  ...extra,
});

const storesAndPaths = SERVING_PATHS.flatMap(([path, lean]) => bothStores(redis).map(([store, makeFixture]) => [store, path, makeFixture, lean] as const));

describe.each(storesAndPaths)('AllowStream on the %s store, on %s', (_store, _path, makeFixture, lean) => {
  let fixture: StoreFixture;
  let service: TestService;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store, undefined, undefined, undefined, lean);
  });
  afterAll(async () => {
    await service?.stop();
  });
  afterEach(async () => {
    await fixture.reset();
  });

  it('answers each batch under its id, each request decided as AllowBatch decides it', async () => {
    const stream = openAllowStream(service.client);
    // 11 for user a (the 11th is denied by its bucket of 10); then user b in a second batch.
    stream.send(
      7,
      Array.from({ length: 11 }, () => order('a')),
    );
    const first = await stream.answer(7);
    stream.send(8, [order('b'), order('b', { cost: 4 })]);
    const second = await stream.answer(8);
    stream.end();
    expect(await stream.ended).toBe('OK');

    expect(first.results.map((r) => r.response?.limits[0]?.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
    expect(first.results[10]!.response).toMatchObject({ allowed: false, deniedBy: 'orders', retryAfterMs: 500 });
    expect(second.results.map((r) => r.response?.limits[0]?.remaining)).toEqual([9, 5]);
    expect(await fixture.tokenBucket('rl:v1:orders:user:{a}')).toMatchObject({ tokens: 0 });
  });

  it('a bad item fails only itself, with the field named inside its batch; the stream goes on', async () => {
    const stream = openAllowStream(service.client);
    stream.send(1, [order('x'), order('y', { policy: 'nope' }), order('z', { cost: -1 }), order('x')]);
    const { results } = await stream.answer(1);
    expect(results.map((r) => r.response?.limits[0]?.remaining)).toEqual([9, undefined, undefined, 8]);
    expect(results[1]!.error).toEqual({ code: Status.NOT_FOUND, message: 'requests[1].policy: no policy named "nope"' });
    expect(results[2]!.error).toEqual({ code: Status.INVALID_ARGUMENT, message: 'requests[2].cost: must not be negative, got -1' });
    stream.send(2, [order('x')]);
    expect((await stream.answer(2)).results[0]!.response?.limits[0]?.remaining).toBe(7);
    stream.end();
    expect(await stream.ended).toBe('OK');
    expect(await fixture.keys()).toEqual(['rl:v1:orders:user:{x}']);
  });

  it('a batch over 1000 requests ends the stream with INVALID_ARGUMENT, after answering the batch before it; it writes nothing', async () => {
    const stream = openAllowStream(service.client);
    stream.send(1, [order('first')]);
    stream.send(
      2,
      Array.from({ length: 1001 }, (_, i) => order(`u${i}`)),
    );
    expect((await stream.answer(1)).results[0]!.response?.allowed).toBe(true);
    expect(await stream.ended).toBe('INVALID_ARGUMENT: requests: at most 1000 per batch, got 1001');
    expect(stream.answers.map((a) => a.id)).toEqual([1]);
    expect(await fixture.keys()).toEqual(['rl:v1:orders:user:{first}']);
  });

  it('an empty batch is an empty answer', async () => {
    const stream = openAllowStream(service.client);
    stream.send(3, []);
    expect(await stream.answer(3)).toEqual({ id: 3, results: [] });
    stream.end();
    expect(await stream.ended).toBe('OK');
  });
});

describe('AllowStream handler', () => {
  it(`reads at most ${MAX_BATCHES_IN_FLIGHT} batches ahead of their answers, then one more per answer`, async () => {
    let read = 0;
    async function* batches() {
      for (let id = 1; id <= MAX_BATCHES_IN_FLIGHT + 6; id++) {
        read++;
        yield { id, requests: [] };
      }
    }
    // Decisions that finish only when the test says so.
    const finish: Array<() => void> = [];
    const decide: DecideBatch = () => new Promise((resolve) => finish.push(() => resolve([])));
    const stream = allowStreamHandler(decide, new AbortController().signal)(batches(), {} as never);
    const firstAnswer = stream.next();
    await vi.waitFor(() => expect(finish).toHaveLength(MAX_BATCHES_IN_FLIGHT));
    expect(read).toBe(MAX_BATCHES_IN_FLIGHT);
    finish[0]!();
    expect(await firstAnswer).toEqual({ done: false, value: { id: 1, results: [] } });
    // Decided is not enough: the slot frees once the answer is written, when the writer asks for the next one.
    expect(read).toBe(MAX_BATCHES_IN_FLIGHT);
    finish[1]!();
    let next = stream.next();
    await vi.waitFor(() => expect(read).toBe(MAX_BATCHES_IN_FLIGHT + 1));
    // The rest: every batch answered once, then the stream ends.
    const ids = [1, ((await next).value as { id: number }).id];
    for (let i = 2; i < MAX_BATCHES_IN_FLIGHT + 6; i++) {
      await vi.waitFor(() => expect(finish.length).toBeGreaterThan(i));
      finish[i]!();
      next = stream.next();
      ids.push(((await next).value as { id: number }).id);
    }
    expect(ids).toEqual(Array.from({ length: MAX_BATCHES_IN_FLIGHT + 6 }, (_, i) => i + 1));
    expect(await stream.next()).toEqual({ done: true, value: undefined });
  });
});

describe('AllowStream handler on a full connection', () => {
  it('a stream its connection’s bound held back keeps its own bound whole once the connection frees', async () => {
    // Stream A fills its connection's bound; stream B, on the same connection, then takes a permit
    // of its own bound but finds none of the connection's, and waits. A stream permit taken then
    // must go back: once A is done, B reads as far ahead as its own bound lets it, no less.
    const connections = new SemaphorePerConnection(MAX_BATCHES_IN_FLIGHT);
    const pending = new Map<unknown, Array<() => void>>();
    const decide: DecideBatch = (_requests, _caller, context) =>
      new Promise((resolve) => {
        const list = pending.get(context) ?? [];
        list.push(() => resolve([]));
        pending.set(context, list);
      });
    const handler = allowStreamHandler(decide, new AbortController().signal, connections);
    const contextOf = (signal = new AbortController().signal) => ({ peer: 'one-connection', signal }) as never;
    let readByB = 0;
    async function* batchesOfA() {
      for (let id = 1; id <= MAX_BATCHES_IN_FLIGHT; id++) yield { id, requests: [] };
    }
    async function* batchesOfB() {
      for (let id = 1; ; id++) {
        readByB++;
        yield { id, requests: [] };
      }
    }
    const contextA = contextOf();
    const a = handler(batchesOfA(), contextA);
    const firstOfA = a.next();
    await vi.waitFor(() => expect(pending.get(contextA)).toHaveLength(MAX_BATCHES_IN_FLIGHT));

    const cancelB = new AbortController();
    const contextB = contextOf(cancelB.signal);
    const b = handler(batchesOfB(), contextB);
    void b.next();
    await new Promise((resolve) => setImmediate(resolve));
    expect(readByB).toBe(0);

    // A answers everything and ends: the connection's permits are free again.
    for (const finish of pending.get(contextA)!) finish();
    expect((await firstOfA).done).toBe(false);
    for (let i = 1; i < MAX_BATCHES_IN_FLIGHT; i++) expect((await a.next()).done).toBe(false);
    expect((await a.next()).done).toBe(true);

    await vi.waitFor(() => expect(readByB).toBe(MAX_BATCHES_IN_FLIGHT));
    await new Promise((resolve) => setImmediate(resolve));
    expect(readByB).toBe(MAX_BATCHES_IN_FLIGHT);
    // B's caller goes: its reading stops, its decisions end, its permits go back.
    cancelB.abort();
    for (const finish of pending.get(contextB)!) finish();
    await b.return(undefined);
  });
});

describe.each(SERVING_PATHS)('AllowStream while the server drains (Redis), on %s', (_path, lean) => {
  it('answers the batch it has read, ends with OK, and never decides a batch sent after the drain began', async () => {
    const fixture = redisFixture(redis());
    await fixture.reset();
    const service = await startTestService(fixture.store, undefined, undefined, undefined, lean);
    const admin = redis().client();
    try {
      const stream = openAllowStream(service.client);
      stream.send(1, [order('a')]);
      await stream.answer(1);
      // Hold the next decision inside Redis: the service has read batch 2 and is deciding it when the drain starts.
      await admin.call('CLIENT', 'PAUSE', '5000', 'WRITE');
      stream.send(2, [order('a')]);
      await waitForPausedScript(admin);
      const shutdown = service.server.shutdown(10_000);
      stream.send(3, [order('c')]);
      await admin.call('CLIENT', 'UNPAUSE');

      expect((await stream.answer(2)).results[0]!.response).toMatchObject({ allowed: true, limits: [{ remaining: 8 }] });
      expect(await stream.ended).toBe('OK');
      expect(stream.answers.map((a) => a.id)).toEqual([1, 2]);
      // The drain did not wait for its grace period: the stream ended as soon as batch 2 was answered.
      const started = performance.now();
      await shutdown;
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(await fixture.keys()).toEqual(['rl:v1:orders:user:{a}']);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => {});
      admin.disconnect();
      service.channel.close();
      await service.server.shutdown(1_000);
    }
  });
});

/** Until a client's script waits on CLIENT PAUSE (INFO clients counts it as blocked). */
async function waitForPausedScript(admin: ReturnType<ReturnType<typeof redis>['client']>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const info = await admin.info('clients');
    if (/blocked_clients:[1-9]/.test(info)) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('no script is waiting on CLIENT PAUSE');
}

describe.each(SERVING_PATHS)('AllowStream with caller authentication, on %s', (_path, lean) => {
  const ORDER_API_TOKEN = 'order-api-token-7f3a9c1e5b2d4f60';
  const callersText = (withOrderApi: boolean) => `
callers:
  ${withOrderApi ? `order-api:\n    token: ${ORDER_API_TOKEN}\n    policies: [orders]\n  ` : ''}gateway:
    token: gateway-token-0c9e8d7b6a5f4e3d2c1b
    policies: ['*']
`;
  const callers = new ReloadableCallerRegistry(parseCallers(callersText(true)));
  // On a virtual clock: no refill between two decisions.
  const store = memoryFixture().store;
  let server: Awaited<ReturnType<typeof startQuotaServer>>;
  let client: ReturnType<typeof createClient<typeof QuotaServiceDefinition>>;
  let channel: ReturnType<typeof createChannel>;
  const asOrderApi = { metadata: Metadata({ authorization: `Bearer ${ORDER_API_TOKEN}` }) };
  beforeAll(async () => {
    server = await startQuotaServer({
      engine: new QuotaEngine(await shippedPolicies(), store),
      address: '127.0.0.1:0',
      logger: createLogger('silent'),
      callers,
      lean,
    });
    server.setServing(true);
    channel = createChannel(`127.0.0.1:${server.port}`);
    client = createClient(QuotaServiceDefinition, channel);
  });
  afterAll(async () => {
    channel.close();
    await server.shutdown(1_000);
  });

  it('without a token the stream is refused with UNAUTHENTICATED', async () => {
    const stream = openAllowStream(client);
    stream.send(1, [order('a')]);
    expect(await stream.ended).toMatch(/^UNAUTHENTICATED: missing bearer token/);
    expect(stream.answers).toEqual([]);
  });

  it('a policy the caller may not use fails only its own items with PERMISSION_DENIED, undecided', async () => {
    const stream = openAllowStream(client, asOrderApi);
    stream.send(1, [order('p1'), { policy: 'user', identity: { user: 'p1' }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }, order('p1')]);
    const { results } = await stream.answer(1);
    stream.end();
    expect(await stream.ended).toBe('OK');
    expect(results.map((r) => r.response?.limits[0]?.remaining)).toEqual([9, undefined, 8]);
    expect(results[1]!.error).toEqual({ code: Status.PERMISSION_DENIED, message: 'requests[1]: caller "order-api" may not use policy "user"' });
  });

  it('a token revoked by a callers reload stops an open stream at its next batch, which is not decided', async () => {
    const stream = openAllowStream(client, asOrderApi);
    stream.send(1, [order('r1')]);
    expect((await stream.answer(1)).results[0]!.response?.allowed).toBe(true);
    callers.replace(parseCallers(callersText(false)));
    try {
      stream.send(2, [order('r2')]);
      expect(await stream.ended).toBe('UNAUTHENTICATED: bearer token no longer valid');
      expect(stream.answers.map((a) => a.id)).toEqual([1]);
    } finally {
      callers.replace(parseCallers(callersText(true)));
    }
    // r2 was never decided: a fresh identity still has its whole bucket.
    const check = openAllowStream(client, asOrderApi);
    check.send(1, [order('r2')]);
    expect((await check.answer(1)).results[0]!.response?.limits[0]?.remaining).toBe(9);
    check.end();
  });

  it('the quota client on a stream with a bearer token: a policy it may not use rejects that call only, with PERMISSION_DENIED', async () => {
    async function* withToken<Request, Response>(call: ClientMiddlewareCall<Request, Response>, options: CallOptions) {
      return yield* call.next(call.request, { ...options, metadata: Metadata(options.metadata).set('authorization', `Bearer ${ORDER_API_TOKEN}`) });
    }
    const quota = createQuotaClient({ address: `127.0.0.1:${server.port}`, deadlineMs: 5_000, onUnavailable: 'fail_open', middleware: withToken });
    try {
      const [allowed, refused] = await Promise.allSettled([
        quota.allow({ policy: 'orders', identity: { user: 'client-1' } }),
        quota.allow({ policy: 'user', identity: { user: 'client-1' } }),
      ]);
      expect(allowed).toMatchObject({ status: 'fulfilled', value: { allowed: true, source: 'store' } });
      expect(refused.status).toBe('rejected');
      const error = (refused as PromiseRejectedResult).reason as QuotaRequestError;
      expect(error).toBeInstanceOf(QuotaRequestError);
      expect([error.code, error.details]).toEqual([Status.PERMISSION_DENIED, 'caller "order-api" may not use policy "user"']);
    } finally {
      await quota.close();
    }
  });
});
