import { createChannel, createClientFactory, createServer, type Server } from 'nice-grpc';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Batcher } from '../../clients/quota-client/src/batcher.js';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { quotaClientDefinition } from '../../clients/quota-client/src/service-definition.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { QuotaServiceDefinition, type QuotaServiceImplementation } from '@quota-service/contract';
import { quotaService } from '../../src/api/quota/quota-service.js';
import { createLogger } from '../../src/logger.js';
import { shippedPolicies } from '../support/quota-service.js';
import { rpcCounter } from '../support/rpc-counter.js';
import { memoryFixture, type StoreFixture } from '../support/store-fixtures.js';

/**
 * The quota client's side of AllowStream's contract, against services that
 * behave in the ways the contract allows: one without the rpc (an older
 * version), and one that ends a stream cleanly before reading a batch (a
 * draining instance).
 */
describe('quota client on AllowStream', () => {
  let server: Server | undefined;
  let client: QuotaClient | undefined;
  afterEach(async () => {
    await client?.close();
    await server?.shutdown();
  });

  /** The real service on a memory store (virtual clock), with `override` replacing some of its handlers. */
  async function serve(
    definition: Pick<typeof QuotaServiceDefinition, 'name' | 'fullName'> & { methods: Partial<typeof QuotaServiceDefinition.methods> },
    override: (real: QuotaServiceImplementation) => Partial<QuotaServiceImplementation> = () => ({}),
  ): Promise<{ fixture: StoreFixture; port: number }> {
    const fixture = memoryFixture();
    const real = quotaService(new QuotaEngine(await shippedPolicies(), fixture.store), createLogger('silent'), new AbortController().signal);
    server = createServer();
    server.add(definition as typeof QuotaServiceDefinition, { ...real, ...override(real) });
    return { fixture, port: await server.listen('127.0.0.1:0') };
  }

  it('a service without AllowStream: the client switches to AllowBatch for good, and each call is decided once', async () => {
    const { allowStream: _left, ...olderMethods } = QuotaServiceDefinition.methods;
    const { fixture, port } = await serve({ ...QuotaServiceDefinition, methods: olderMethods });
    const counter = rpcCounter();
    client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 5_000, middleware: counter.middleware });

    const first = await Promise.all([1, 2, 3].map(() => client!.allow({ policy: 'orders', identity: { user: 'old' } })));
    const second = await Promise.all([1, 2].map(() => client!.allow({ policy: 'orders', identity: { user: 'old' } })));
    expect([...first, ...second].map((d) => [d.source, d.limits[0]?.remaining])).toEqual([
      ['store', 9],
      ['store', 8],
      ['store', 7],
      ['store', 6],
      ['store', 5],
    ]);
    expect(await fixture.tokenBucket('rl:v1:orders:user:{old}')).toMatchObject({ tokens: 5 });
    expect([counter.count('AllowStream'), counter.count('AllowBatch'), counter.count('Allow')]).toEqual([1, 2, 0]);
  });

  it('a stream that ends with OK before reading a batch: the batch goes once more on a new stream, decided once', async () => {
    let streams = 0;
    const { fixture, port } = await serve(QuotaServiceDefinition, (real) => ({
      // The first stream ends at once, as a draining instance ends one: nothing read, nothing decided.
      allowStream: (requests, context) => (++streams === 1 ? (async function* () {})() : real.allowStream(requests, context)),
    }));
    const counter = rpcCounter();
    client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 5_000, middleware: counter.middleware });

    const decision = await client.allow({ policy: 'orders', identity: { user: 'again' } });
    expect(decision).toMatchObject({ allowed: true, source: 'store', limits: [{ remaining: 9 }] });
    expect(await fixture.tokenBucket('rl:v1:orders:user:{again}')).toMatchObject({ tokens: 9 });
    expect([counter.count('AllowStream'), counter.messages('AllowStream')]).toEqual([2, 2]);
  });

  it('a stream that keeps ending unread: the second try is the last, and the failure policy answers', async () => {
    const { fixture, port } = await serve(QuotaServiceDefinition, () => ({ allowStream: () => (async function* () {})() }));
    const counter = rpcCounter();
    client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 5_000, onUnavailable: 'fail_open', middleware: counter.middleware });

    expect(await client.allow({ policy: 'orders', identity: { user: 'never' } })).toMatchObject({ allowed: true, source: 'fail_open' });
    expect(counter.count('AllowStream')).toBe(2);
    expect(await fixture.keys()).toEqual([]);
  });

  it('a hung service: a batch whose callers all gave up is forgotten, not held until the service answers', async () => {
    // Reads every batch, answers none, never ends: a service that hangs mid-stream.
    const { port } = await serve(QuotaServiceDefinition, () => ({
      async *allowStream(requests) {
        for await (const _batch of requests);
      },
    }));
    const channel = createChannel(`127.0.0.1:${port}`);
    const batcher = new Batcher(createClientFactory().create(quotaClientDefinition, channel), { maxDelayMs: 0, maxSize: 100, stream: true });
    try {
      const request = { policy: 'orders', identity: { user: 'hung' }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 };
      const outcomes = await Promise.allSettled([batcher.send(request, 50, undefined), batcher.send(request, 50, undefined)]);
      expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).name : 'answered'))).toEqual(['TimeoutError', 'TimeoutError']);
      expect(await batcher.send(request, 50, undefined).catch((e: Error) => e.name)).toBe('TimeoutError');
      expect(batcher.unansweredBatches).toBe(0);
    } finally {
      batcher.close();
      channel.close();
    }
  });

  describe('a stream that looks hung is retired (the Batcher against services that do not answer in time)', () => {
    const request = (user: string) => ({ policy: 'orders', identity: { user }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
    const connect = async (allowStream: QuotaServiceImplementation['allowStream']) => {
      const { port } = await serve(QuotaServiceDefinition, () => ({ allowStream }));
      const counter = rpcCounter();
      const channel = createChannel(`127.0.0.1:${port}`);
      const batcher = new Batcher(createClientFactory().use(counter.middleware).create(quotaClientDefinition, channel), {
        maxDelayMs: 0,
        maxSize: 100,
        stream: true,
      });
      return { batcher, counter, close: () => (batcher.close(), channel.close()) };
    };
    const outcome = (promise: Promise<unknown>) =>
      promise.then(
        () => 'answered',
        (error: Error) => error.name,
      );

    it('a batch that ran out its deadline unanswered retires the stream: the next batch opens a new one, the old call is cancelled', async () => {
      // Reads every batch, answers none, never ends.
      const { batcher, counter, close } = await connect(async function* (requests) {
        for await (const _batch of requests);
      });
      try {
        for (let i = 1; i <= 3; i++) {
          expect(await outcome(batcher.send(request('hung'), 50, undefined))).toBe('TimeoutError');
          expect(counter.count('AllowStream')).toBe(i);
        }
        await vi.waitFor(() => expect(counter.finished('AllowStream')).toBe(3), { timeout: 5_000, interval: 5 });
        expect(batcher.unansweredBatches).toBe(0);
      } finally {
        close();
      }
    });

    it('a caller that gives up by its own signal says nothing of the stream: it is kept', async () => {
      const { batcher, counter, close } = await connect(async function* (requests) {
        for await (const _batch of requests);
      });
      try {
        const leaving = new AbortController();
        const first = outcome(batcher.send(request('left'), 5_000, leaving.signal));
        leaving.abort(new Error('the caller left'));
        expect(await first).toBe('Error');
        expect(await outcome(batcher.send(request('left'), 50, undefined))).toBe('TimeoutError');
        // The timed-out batch, not the abandoned one, retired the stream.
        expect(counter.count('AllowStream')).toBe(1);
        expect(await outcome(batcher.send(request('left'), 50, undefined))).toBe('TimeoutError');
        expect(counter.count('AllowStream')).toBe(2);
      } finally {
        close();
      }
    });

    it('a slow answer on a stream that answers later batches is not a hang: the stream is kept', async () => {
      // Holds the first batch for 1 s, answers every other at once.
      const { batcher, counter, close } = await connect(async function* (requests) {
        let held: number | undefined;
        let release: Promise<void> | undefined;
        for await (const batch of requests) {
          const results = batch.requests.map(() => ({ error: { code: 14, message: 'not decided here' } }));
          if (held === undefined) {
            held = batch.id;
            release = new Promise((resolve) => setTimeout(resolve, 1_000));
            continue;
          }
          yield { id: batch.id, results };
          if (release !== undefined) {
            await release;
            release = undefined;
            yield { id: held, results };
          }
        }
      });
      try {
        // Its deadline leaves the quick one below ample time to be answered first.
        const slow = outcome(batcher.send(request('slow'), 500, undefined));
        await new Promise((resolve) => setImmediate(resolve));
        // Sent after the slow one and answered at once, before the slow one's deadline.
        expect(await outcome(batcher.send(request('quick'), 5_000, undefined))).toBe('ClientError');
        expect(await slow).toBe('TimeoutError');
        expect(await outcome(batcher.send(request('next'), 5_000, undefined))).toBe('ClientError');
        expect(counter.count('AllowStream')).toBe(1);
      } finally {
        close();
      }
    });
  });

  describe('stream renewal (the Batcher, with short timings)', () => {
    const connectBatcher = async (timing: { idleMs?: number; maxAgeMs?: number }) => {
      const { fixture, port } = await serve(QuotaServiceDefinition);
      const counter = rpcCounter();
      const channel = createChannel(`127.0.0.1:${port}`);
      const rpc = createClientFactory().use(counter.middleware).create(quotaClientDefinition, channel);
      const batcher = new Batcher(rpc, { maxDelayMs: 0, maxSize: 100, stream: true, streamTiming: timing });
      const allow = (user: string) =>
        batcher.send({ policy: 'orders', identity: { user }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }, 5_000, undefined);
      return { fixture, counter, allow, close: () => (batcher.close(), channel.close()) };
    };

    it('an idle stream is ended (so it does not keep the process alive); the next call opens a new one', async () => {
      const { counter, allow, close } = await connectBatcher({ idleMs: 20 });
      try {
        expect((await allow('idle')).limits[0]?.remaining).toBe(9);
        expect(counter.finished('AllowStream')).toBe(0);
        await vi.waitFor(() => expect(counter.finished('AllowStream')).toBe(1), { timeout: 5_000, interval: 5 });
        expect((await allow('idle')).limits[0]?.remaining).toBe(8);
        expect(counter.count('AllowStream')).toBe(2);
      } finally {
        close();
      }
    });

    it('a stream past its age takes no new batch: each goes on a fresh stream, decided once, the old one ends', async () => {
      const { fixture, counter, allow, close } = await connectBatcher({ maxAgeMs: 0 });
      try {
        for (const remaining of [9, 8, 7]) expect((await allow('aging')).limits[0]?.remaining).toBe(remaining);
        expect(counter.count('AllowStream')).toBe(3);
        expect(await fixture.tokenBucket('rl:v1:orders:user:{aging}')).toMatchObject({ tokens: 7 });
        await vi.waitFor(() => expect(counter.finished('AllowStream')).toBe(2), { timeout: 5_000, interval: 5 });
      } finally {
        close();
      }
    });
  });
});
