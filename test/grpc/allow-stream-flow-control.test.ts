import { AllowStreamRequest, AllowStreamResponse, type AllowRequest } from '@quota-service/contract';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { STREAM_BOUNDS } from '../../src/api/quota/allow-stream.js';
import { SERVING_PATHS, startTestService, type TestService } from '../support/quota-service.js';
import { connectRawGrpc, type RawGrpcConnection } from '../support/raw-grpc-stream.js';
import { memoryFixture } from '../support/store-fixtures.js';

/**
 * AllowStream against callers that send and never read their answers, on a
 * real server and a bare HTTP/2 connection: the service stops reading such a
 * stream (HTTP/2 flow control then holds the caller back), so the batches it
 * decides, and the memory they take, stay within the stream and connection bounds.
 */
const PER_BATCH = 100;
const ALLOW_STREAM = '/quota.v1.QuotaService/AllowStream';
const order = (user: string): AllowRequest => ({ policy: 'orders', identity: { user }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
const batch = (stream: number, id: number): Uint8Array =>
  AllowStreamRequest.encode({ id, requests: Array.from({ length: PER_BATCH }, (_, i) => order(`s${stream}-b${id}-${i}`)) }).finish();

/** Answers a stream's transport takes before its writer blocks (HTTP/2 windows, write buffers): about 17 of these were seen. */
const TRANSPORT_SLACK = 24;

let service: TestService | undefined;
let connection: RawGrpcConnection | undefined;
afterEach(async () => {
  connection?.close();
  await service?.stop();
});

async function start(lean: boolean): Promise<{ decidedBatches: () => number; connection: RawGrpcConnection }> {
  let decided = 0;
  service = await startTestService(memoryFixture().store, undefined, { onDecision: (policy) => policy === 'orders' && decided++ }, undefined, lean);
  connection = connectRawGrpc(`127.0.0.1:${service.server.port}`);
  return { decidedBatches: () => Math.ceil(decided / PER_BATCH), connection };
}

/** Lets the service run: round trips of another caller's Allow on its own connection. */
async function bystanderCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const answer = await service!.client.allow({ policy: 'user', identity: { user: 'bystander' }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
    expect(answer.limits).toHaveLength(1);
  }
}

describe.each(SERVING_PATHS)('AllowStream flow control, on %s', (_path, lean) => {
  it(`a stream whose answers are never read: at most ${STREAM_BOUNDS.batchesPerStream} batches (plus what the transport holds) are decided, the rest once it reads`, async () => {
    const { decidedBatches, connection } = await start(lean);
    const stream = connection.open(ALLOW_STREAM);
    const sent = 600;
    for (let id = 1; id <= sent; id++) stream.send(batch(0, id));

    await vi.waitFor(() => expect(decidedBatches()).toBeGreaterThanOrEqual(STREAM_BOUNDS.batchesPerStream), { timeout: 10_000 });
    // Other callers are served meanwhile, and the stream does not move on.
    await bystanderCalls(100);
    expect(decidedBatches()).toBeLessThanOrEqual(STREAM_BOUNDS.batchesPerStream + TRANSPORT_SLACK);

    // Reading resumes the stream: every batch is answered once.
    const ids = new Set<number>();
    const reading = stream.read((bytes) => {
      ids.add(AllowStreamResponse.decode(bytes).id);
      if (ids.size === sent) stream.end();
    });
    await reading;
    expect(ids.size).toBe(sent);
    expect(decidedBatches()).toBe(sent);
  });

  it(`several such streams on one connection: at most ${STREAM_BOUNDS.batchesPerConnection} batches held for the connection`, async () => {
    const { decidedBatches, connection } = await start(lean);
    const streams = Array.from({ length: 16 }, () => connection.open(ALLOW_STREAM));
    streams.forEach((stream, s) => {
      for (let id = 1; id <= 100; id++) stream.send(batch(s, id));
    });
    await vi.waitFor(() => expect(decidedBatches()).toBeGreaterThanOrEqual(STREAM_BOUNDS.batchesPerConnection), { timeout: 10_000 });
    await bystanderCalls(100);
    // Each stream's transport holds a few answers of its own; without the connection's bound, 16 streams would hold 16 x 64.
    expect(decidedBatches()).toBeLessThanOrEqual(STREAM_BOUNDS.batchesPerConnection + streams.length * TRANSPORT_SLACK);
    for (const stream of streams) stream.cancel();
  });

  it('a cancelled stream gives its slots back: the connection serves a new stream in full', async () => {
    const { decidedBatches, connection } = await start(lean);
    const stuck = Array.from({ length: 4 }, () => connection.open(ALLOW_STREAM));
    stuck.forEach((stream, s) => {
      for (let id = 1; id <= 100; id++) stream.send(batch(s, id));
    });
    await vi.waitFor(() => expect(decidedBatches()).toBeGreaterThanOrEqual(STREAM_BOUNDS.batchesPerConnection), { timeout: 10_000 });
    for (const stream of stuck) stream.cancel();
    const before = decidedBatches();
    const fresh = connection.open(ALLOW_STREAM);
    for (let id = 1; id <= 50; id++) fresh.send(batch(9, id));
    let answered = 0;
    await fresh.read(() => {
      if (++answered === 50) fresh.end();
    });
    expect(answered).toBe(50);
    // Batches the cancelled streams had already read may still be decided after the cancel: a few per stream.
    expect(decidedBatches()).toBeGreaterThanOrEqual(before + 50);
    expect(decidedBatches()).toBeLessThanOrEqual(before + 50 + stuck.length * TRANSPORT_SLACK);
  });
});
