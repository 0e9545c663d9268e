import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { type QuotaServiceImplementation, QuotaServiceDefinition } from '@quota-service/contract';
import { type CallOptions, type ClientMiddlewareCall, createServer, type Server, ServerError, Status } from 'nice-grpc';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { quotaService } from '../../src/api/quota/quota-service.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createLogger } from '../../src/logger.js';
import { shippedPolicies } from '../support/quota-service.js';
import { memoryFixture, type StoreFixture } from '../support/store-fixtures.js';

/**
 * The batching client opens its AllowStream on grpc-js directly when it has
 * no middleware, and through nice-grpc's client (and the middleware) when it
 * has one. Both must keep AllowStream's contract alike: each case runs on both
 * (a middleware that only passes the call on selects nice-grpc's), against
 * services that behave in the ways the contract allows, counted on the
 * service's side.
 */
async function* passOn<Request, Response>(call: ClientMiddlewareCall<Request, Response>, options: CallOptions) {
  return yield* call.next(call.request, options);
}

const TRANSPORTS: Array<[name: string, middleware: typeof passOn | undefined]> = [
  ['grpc-js directly (no middleware)', undefined],
  ["nice-grpc's client (a middleware)", passOn],
];

describe.each(TRANSPORTS)('quota client on AllowStream, %s', (_name, middleware) => {
  let server: Server | undefined;
  let client: QuotaClient | undefined;
  afterEach(async () => {
    await client?.close();
    await server?.shutdown();
  });

  /** The real service on a memory store, `override` replacing some of its handlers; the streams opened and the batches read, counted. */
  async function serve(override: (real: QuotaServiceImplementation) => Partial<QuotaServiceImplementation> = () => ({})) {
    const fixture: StoreFixture = memoryFixture();
    const real = quotaService(new QuotaEngine(await shippedPolicies(), fixture.store), createLogger('silent'), new AbortController().signal);
    const counts = { streams: 0, batches: 0 };
    const served = { ...real, ...override(real) };
    server = createServer();
    server.add(QuotaServiceDefinition, {
      ...served,
      allowStream(requests, context) {
        counts.streams++;
        return served.allowStream(counted(requests), context);
      },
    });
    async function* counted<T>(requests: AsyncIterable<T>) {
      for await (const request of requests) {
        counts.batches++;
        yield request;
      }
    }
    const port = await server.listen('127.0.0.1:0');
    client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 5_000, onUnavailable: 'fail_open', middleware });
    return { fixture, counts, client };
  }

  const allow = (client: QuotaClient, user: string) => client.allow({ policy: 'orders', identity: { user } });

  it('batches one after another on one stream, each decided once', async () => {
    const { fixture, counts, client } = await serve();
    for (const remaining of [9, 8, 7]) expect(await allow(client, 'one')).toMatchObject({ source: 'store', limits: [{ remaining }] });
    expect(await fixture.tokenBucket('rl:v1:orders:user:{one}')).toMatchObject({ tokens: 7 });
    expect(counts).toEqual({ streams: 1, batches: 3 });
  });

  it('an answer written just before the stream ends with OK is the answer: not sent again', async () => {
    // Answers the first batch it reads, then ends the stream at once (as a draining instance may).
    const { fixture, counts, client } = await serve((real) => ({
      async *allowStream(requests, context) {
        for await (const answer of real.allowStream(requests, context)) {
          yield answer;
          return;
        }
      },
    }));
    expect(await allow(client, 'last')).toMatchObject({ source: 'store', limits: [{ remaining: 9 }] });
    expect(await fixture.tokenBucket('rl:v1:orders:user:{last}')).toMatchObject({ tokens: 9 });
    expect(counts.streams).toBe(1);
  });

  it('a stream that ends with OK before reading a batch: the batch goes once more on a new stream, decided once', async () => {
    let streams = 0;
    const { fixture, counts, client } = await serve((real) => ({
      allowStream: (requests, context) => (++streams === 1 ? (async function* () {})() : real.allowStream(requests, context)),
    }));
    expect(await allow(client, 'again')).toMatchObject({ allowed: true, source: 'store', limits: [{ remaining: 9 }] });
    expect(await fixture.tokenBucket('rl:v1:orders:user:{again}')).toMatchObject({ tokens: 9 });
    expect(counts.streams).toBe(2);
  });

  it('a stream that keeps ending unread: the second try is the last, and the failure policy answers', async () => {
    const { fixture, counts, client } = await serve(() => ({ allowStream: () => (async function* () {})() }));
    expect(await allow(client, 'never')).toMatchObject({ allowed: true, source: 'fail_open' });
    expect(counts.streams).toBe(2);
    expect(await fixture.keys()).toEqual([]);
  });

  it('a service without AllowStream (UNIMPLEMENTED): no stream from then on, each call decided once', async () => {
    const { fixture, counts, client } = await serve(() => ({
      allowStream: () => {
        throw new ServerError(Status.UNIMPLEMENTED, 'no AllowStream here');
      },
    }));
    for (const remaining of [9, 8]) expect(await allow(client, 'old')).toMatchObject({ source: 'store', limits: [{ remaining }] });
    expect(await fixture.tokenBucket('rl:v1:orders:user:{old}')).toMatchObject({ tokens: 8 });
    expect(counts.streams).toBe(1);
  });

  it('a stream that fails with a status: the batch is not sent again, and the failure policy answers', async () => {
    const { fixture, counts, client } = await serve(() => ({
      allowStream: () => {
        throw new ServerError(Status.UNAVAILABLE, 'going away');
      },
    }));
    expect(await allow(client, 'failed')).toMatchObject({ allowed: true, source: 'fail_open' });
    expect(counts.streams).toBe(1);
    expect(await fixture.keys()).toEqual([]);
  });

  it('a caller whose stream is idle ends it; the next call opens a new one', async () => {
    const { counts, client } = await serve();
    expect(await allow(client, 'idle')).toMatchObject({ limits: [{ remaining: 9 }] });
    await client.close();
    // Closing ends the open stream: the service sees its batches end.
    await vi.waitFor(() => expect(counts.batches).toBe(1));
  });
});
