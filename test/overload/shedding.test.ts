import { createQuotaClient } from '@quota-service/client';
import { QuotaServiceDefinition, type AllowRequest } from '@quota-service/contract';
import { ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCallers } from '../../src/config/callers.js';
import { ReloadableCallerRegistry } from '../../src/config/callers-watcher.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { openAllowStream } from '../support/allow-stream-probe.js';
import { HangingStore } from '../support/hanging-store.js';
import { shippedPolicies } from '../support/quota-service.js';

/**
 * Load shedding: past the bounds on pending decisions (in all, and per
 * caller) a call is refused at once with RESOURCE_EXHAUSTED and a retry hint,
 * decided by nothing, so an overloaded service never grants; one caller's
 * flood leaves the others their room. The store here never answers (and the
 * failure budget is long), so every admitted decision stays pending.
 */
const HOG = 'hog-token-5d1c3b9a7e2f4a6c8b0d';
const OTHER = 'other-token-8e2a6c4f0b1d3e5a7c9f';
const callers = new ReloadableCallerRegistry(
  parseCallers(`
callers:
  hog: { token: ${HOG}, policies: ['*'] }
  other: { token: ${OTHER}, policies: ['*'] }
`),
);
const as = (token: string) => ({ metadata: Metadata({ authorization: `Bearer ${token}` }) });
const order = (user: string): AllowRequest => ({ policy: 'orders', identity: { user }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });

let server: QuotaServer | undefined;
let channel: Channel | undefined;
let store: HangingStore | undefined;
afterEach(async () => {
  channel?.close();
  await store?.close();
  await server?.shutdown(100);
});

async function start(admission: { total: number; perCaller: number }) {
  store = new HangingStore();
  const failure = new StoreFailurePolicy({ timeoutMs: 60_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
  server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), store, { failure }),
    address: '127.0.0.1:0',
    logger: createLogger('silent'),
    callers,
    admission,
  });
  server.setServing(true);
  channel = createChannel(`127.0.0.1:${server.port}`);
  return createClient(QuotaServiceDefinition, channel);
}

async function refusal(call: Promise<unknown>): Promise<{ code: Status; details: string }> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ClientError);
  return { code: (error as ClientError).code, details: (error as ClientError).details };
}

describe('load shedding', () => {
  it("past a caller's share: RESOURCE_EXHAUSTED with a retry hint, nothing decided; another caller is still admitted", async () => {
    const client = await start({ total: 100, perCaller: 20 });
    // The hog fills its share with decisions that stay pending.
    void client.allowBatch({ requests: Array.from({ length: 20 }, (_, i) => order(`h${i}`)) }, as(HOG)).catch(() => {});
    await expectAsked(20);
    let trailer: Metadata | undefined;
    const shed = await refusal(client.allow(order('h-more'), { ...as(HOG), onTrailer: (t) => (trailer = t) }));
    expect(shed).toEqual({ code: Status.RESOURCE_EXHAUSTED, details: 'overloaded: too many decisions pending for this caller; retry in 100 ms' });
    expect(trailer?.get('retry-after-ms')).toBe('100');
    expect(await refusal(client.allowBatch({ requests: [order('h-batch')] }, as(HOG)))).toMatchObject({ code: Status.RESOURCE_EXHAUSTED });
    expect(await refusal(client.getQuota({ policy: 'orders', identity: { user: 'h' } }, as(HOG)))).toMatchObject({ code: Status.RESOURCE_EXHAUSTED });
    // Refused before the engine: the store was asked nothing more.
    expect(store!.asked).toBe(20);
    // Another caller's decision is admitted (it reaches the store).
    void client.allow(order('o1'), as(OTHER)).catch(() => {});
    await expectAsked(21);
  });

  it('past the service bound: every caller is shed; an AllowStream batch is answered item by item and the stream goes on', async () => {
    const client = await start({ total: 30, perCaller: 30 });
    void client.allowBatch({ requests: Array.from({ length: 30 }, (_, i) => order(`h${i}`)) }, as(HOG)).catch(() => {});
    await expectAsked(30);
    expect(await refusal(client.allow(order('o1'), as(OTHER)))).toEqual({
      code: Status.RESOURCE_EXHAUSTED,
      details: 'overloaded: too many decisions pending for the service; retry in 100 ms',
    });
    const stream = openAllowStream(client, as(OTHER));
    stream.send(1, [order('s1'), order('s2')]);
    const { results } = await stream.answer(1);
    expect(results.map((r) => r.error?.code)).toEqual([Status.RESOURCE_EXHAUSTED, Status.RESOURCE_EXHAUSTED]);
    stream.send(2, [order('s3')]);
    expect((await stream.answer(2)).results[0]!.error?.code).toBe(Status.RESOURCE_EXHAUSTED);
    stream.end();
    expect(await stream.ended).toBe('OK');
    expect(store!.asked).toBe(30);
  });

  it('the quota client answers a shed call as a denial with the hint, even when its failure policy is fail_open', async () => {
    const client = await start({ total: 100, perCaller: 5 });
    void client.allowBatch({ requests: Array.from({ length: 5 }, (_, i) => order(`h${i}`)) }, as(HOG)).catch(() => {});
    await expectAsked(5);
    // Over AllowStream (the client's default) and over unary calls.
    for (const stream of [true, false]) {
      const quota = createQuotaClient({
        address: `127.0.0.1:${server!.port}`,
        onUnavailable: 'fail_open',
        stream,
        middleware: async function* (call, options) {
          return yield* call.next(call.request, { ...options, metadata: Metadata(options.metadata).set('authorization', `Bearer ${HOG}`) });
        },
      });
      try {
        const decision = await quota.allow({ policy: 'orders', identity: { user: `c-${stream}` } });
        expect(decision).toEqual({ allowed: false, retryAfterMs: 100, deniedBy: '', limits: [], delayMs: 0, source: 'fail_closed' });
      } finally {
        await quota.close();
      }
    }
  });
});

async function expectAsked(count: number): Promise<void> {
  for (let i = 0; i < 500 && store!.asked < count; i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(store!.asked).toBe(count);
}
