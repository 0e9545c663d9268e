import { createChannel, createClientFactory, createServer, type Server } from 'nice-grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { type AllowStreamRequest, type AllowStreamResponse, QuotaServiceDefinition } from '@quota-service/contract';
import { Batcher } from '../../clients/quota-client/src/batcher.js';
import { quotaClientDefinition } from '../../clients/quota-client/src/service-definition.js';

/**
 * When the quota client's batcher sends (the default `maxDelayMs: 0`): a call
 * that finds no batch in flight goes at the end of its turn, before the next
 * I/O turn (a turn's many calls as two batches); behind a batch in flight, the
 * calls of one turn go as a second batch, and calls made alone ride the next,
 * sent when a batch answers, or after the hold at the latest. The service here
 * records each batch it reads and answers when the test lets it.
 */
const endOfTurn = () => new Promise<void>((resolve) => process.nextTick(resolve));
const nextIoTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const NOT_DECIDED = 'UNAVAILABLE: not decided here';
const request = (user: string) => ({ policy: 'orders', identity: { user }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });

describe('quota client batches: when they go, and how many at once', () => {
  let server: Server | undefined;
  let close = () => {};
  afterEach(async () => {
    close();
    await server?.shutdown();
  });

  /** A service that records each batch's users and answers a batch (every item an error) when `release` is called. */
  async function connect(holdMs?: number) {
    const batches: string[][] = [];
    const releases: Array<() => void> = [];
    let arrived: () => void = () => {};
    server = createServer();
    const definition = { ...QuotaServiceDefinition, methods: { allowStream: QuotaServiceDefinition.methods.allowStream } };
    server.add(
      definition as typeof QuotaServiceDefinition,
      {
        async *allowStream(requests: AsyncIterable<AllowStreamRequest>): AsyncIterable<AllowStreamResponse> {
          const answers: AllowStreamResponse[] = [];
          let wake: () => void = () => {};
          let ended = false;
          void (async () => {
            for await (const batch of requests) {
              batches.push(batch.requests.map((r) => r.identity!.user!));
              releases.push(() => {
                answers.push({ id: batch.id, results: batch.requests.map(() => ({ error: { code: 14, message: 'not decided here' } })) });
                wake();
              });
              arrived();
            }
            ended = true;
            wake();
          })();
          while (!ended) {
            while (answers.length > 0) yield answers.shift()!;
            await new Promise<void>((resolve) => (wake = resolve));
          }
        },
      } as never,
    );
    const port = await server.listen('127.0.0.1:0');
    const channel = createChannel(`127.0.0.1:${port}`);
    const rpc = createClientFactory().create(quotaClientDefinition, channel);
    const batcher = new Batcher(rpc, { maxDelayMs: 0, maxSize: 100, stream: true, holdMs });
    close = () => (batcher.close(), channel.close());
    const batchesRead = async (n: number) => {
      while (batches.length < n) await new Promise<void>((resolve) => (arrived = resolve));
    };
    const send = (user: string) => batcher.send(request(user), 10_000, undefined).catch((e: Error) => e.message.slice(e.message.indexOf(' ') + 1));
    return { batches, releases, batchesRead, send };
  }

  it('calls of later turns wait while a batch is unanswered, and go as one batch when it answers', async () => {
    const { batches, releases, batchesRead, send } = await connect(60_000);
    const first = send('a');
    await endOfTurn();
    const later: Array<Promise<unknown>> = [];
    for (const user of ['b', 'c', 'd']) {
      await nextIoTurn();
      later.push(send(user));
    }
    await batchesRead(1);
    // Time for the service to read anything else that was sent.
    for (let i = 0; i < 20; i++) await nextIoTurn();
    expect(batches).toEqual([['a']]);

    releases[0]!();
    expect(await first).toBe(NOT_DECIDED);
    await batchesRead(2);
    expect(batches).toEqual([['a'], ['b', 'c', 'd']]);
    releases[1]!();
    expect(await Promise.all(later)).toEqual([NOT_DECIDED, NOT_DECIDED, NOT_DECIDED]);
  });

  it('behind a batch in flight, the calls of one turn go as a second batch', async () => {
    const { batches, releases, batchesRead, send } = await connect(60_000);
    const first = send('a');
    await endOfTurn();
    await nextIoTurn();
    const together = [send('b'), send('c')];
    await batchesRead(2);
    expect(batches).toEqual([['a'], ['b', 'c']]);
    releases[1]!();
    expect(await Promise.all(together)).toEqual([NOT_DECIDED, NOT_DECIDED]);
    releases[0]!();
    expect(await first).toBe(NOT_DECIDED);
  });

  it('the calls of one turn that find no batch in flight go as two batches, answered apart', async () => {
    const { batches, releases, batchesRead, send } = await connect(60_000);
    const calls = ['a', 'b', 'c', 'd', 'e'].map(send);
    await batchesRead(2);
    expect(batches).toEqual([
      ['a', 'b', 'c'],
      ['d', 'e'],
    ]);
    releases[1]!();
    expect(await Promise.all(calls.slice(3))).toEqual([NOT_DECIDED, NOT_DECIDED]);
    releases[0]!();
    expect(await Promise.all(calls.slice(0, 3))).toEqual([NOT_DECIDED, NOT_DECIDED, NOT_DECIDED]);
  });

  it('a batch that does not answer holds the calls behind it no longer than the hold', async () => {
    const { batches, releases, batchesRead, send } = await connect(20);
    void send('a');
    await endOfTurn();
    await nextIoTurn();
    const held = send('b');
    await batchesRead(2);
    expect(batches).toEqual([['a'], ['b']]);
    releases[1]!();
    expect(await held).toBe(NOT_DECIDED);
    releases[0]!();
  });
});
