import { gzipSync } from 'node:zlib';
import { AllowStreamRequest, AllowStreamResponse } from '@quota-service/contract';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { QuotaEngine } from '../../src/engine/engine.js';
import { RawStreamCall } from '../../src/grpc/raw-stream.js';
import { createLogger } from '../../src/logger.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { MemoryStore } from '../../src/store/memory.js';
import { exchange, framed, framesOf, oversized, statusOf, type WireExchange } from '../support/grpc-wire.js';
import { shippedPolicies } from '../support/quota-service.js';

// The lean path reads AllowStream off the HTTP/2 stream itself (src/grpc/raw-stream.ts) and leaves
// to grpc-js what it does not read the same way. Each case here sends a whole stream (its messages,
// then its end) to both servers as HTTP/2 frames, and both must send the same frames back: headers,
// each answer, trailers.

const ALLOW_STREAM = '/quota.v1.QuotaService/AllowStream';

async function serve(lean: boolean): Promise<QuotaServer> {
  const server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), new MemoryStore()),
    address: '127.0.0.1:0',
    logger: createLogger('silent'),
    lean,
  });
  server.setServing(true);
  return server;
}

/** The answer with each message decoded, without what moves with the clock (a time until reset, a bucket's refill). */
function timeless(answer: WireExchange): unknown {
  const messages = framesOf(answer.data).map(({ flag, message }) => {
    const decoded = AllowStreamResponse.decode(message);
    const results = decoded.results.map((result) => ({
      ...result,
      response: result.response && {
        ...result.response,
        limits: result.response.limits.map((limit) => ({ ...limit, remaining: Math.floor(limit.remaining), resetAfterMs: 0 })),
      },
    }));
    return { flag, id: decoded.id, results };
  });
  return { headers: answer.headers, messages, trailers: answer.trailers };
}

const batchBytes = (id: number, user: string, n = 1) =>
  AllowStreamRequest.encode({
    id,
    requests: Array.from({ length: n }, (_, i) => ({
      policy: 'orders',
      identity: { user: `${user}-${i}` },
      cost: 1,
      requestId: '',
      deadlineMs: 0,
      sentAtUnixMs: 0,
    })),
  }).finish();
const batch = (id: number, user: string, n = 1) => framed(batchBytes(id, user, n));

// Each case names its own identities so both servers see them fresh (the decisions then match).
const CASES: Array<[name: string, body: (id: string) => Buffer, headers: Record<string, string>]> = [
  ['two batches, then the end', (id) => Buffer.concat([batch(1, id, 2), batch(2, id)]), {}],
  ['one batch with a timeout', (id) => batch(7, id), { 'grpc-timeout': '5S' }],
  // Past HTTP/2's 16 KiB frame: the batch arrives in pieces.
  ['a batch of 1,000 requests', (id) => batch(1, id, 1000), {}],
  ['forty batches in one write', (id) => Buffer.concat(Array.from({ length: 40 }, (_, i) => batch(i + 1, `${id}-${i}`))), {}],
  ['no batch, then the end', () => Buffer.alloc(0), {}],
  ['a batch, then half a frame', (id) => Buffer.concat([batch(1, id), batch(2, id).subarray(0, 8)]), {}],
  ['a batch, then a frame declared larger than the limit', (id) => Buffer.concat([batch(1, id), oversized()]), {}],
  ['bytes that are no message', () => framed(Buffer.from([0x0a, 0xff, 0xff])), {}],
  ['a batch with the flag of a compressed message and no encoding', (id) => framed(batchBytes(3, id), 1), {}],
  ['a stream compressed with gzip', (id) => framed(gzipSync(batchBytes(4, id)), 1), { 'grpc-encoding': 'gzip' }],
  ['a stream with a malformed timeout', (id) => batch(5, id), { 'grpc-timeout': 'soon' }],
  ['a stream whose content type is not gRPC', (id) => batch(6, id), { 'content-type': 'application/json' }],
];

describe('the lean stream path sends the frames grpc-js sends', () => {
  let lean: QuotaServer;
  let middleware: QuotaServer;
  beforeAll(async () => {
    [lean, middleware] = await Promise.all([serve(true), serve(false)]);
  });
  afterAll(async () => {
    await Promise.all([lean.shutdown(1_000), middleware.shutdown(1_000)]);
  });

  CASES.forEach(([name, body, headers], index) => {
    it(name, async () => {
      const request = body(`wire-${index}`);
      const fromLean = timeless(await exchange(lean.port, ALLOW_STREAM, request, headers));
      const fromMiddleware = timeless(await exchange(middleware.port, ALLOW_STREAM, request, headers));
      expect(fromLean).toEqual(fromMiddleware);
    });
  });

  it('reads AllowStream off the stream itself on the lean path, and only there', async () => {
    // What the comparisons above compare: the lean server's answers come from raw-stream.ts, not from grpc-js.
    const start = vi.spyOn(RawStreamCall.prototype, 'start');
    try {
      await exchange(lean.port, ALLOW_STREAM, batch(1, 'taken'));
      expect(start).toHaveBeenCalledTimes(1);
      await exchange(middleware.port, ALLOW_STREAM, batch(1, 'not-taken'));
      await exchange(lean.port, ALLOW_STREAM, batch(1, 'malformed'), { 'grpc-timeout': 'soon' });
      expect(start).toHaveBeenCalledTimes(1);
    } finally {
      start.mockRestore();
    }
  });

  it('answers the cases differently (the comparison means something)', async () => {
    const statuses = new Set<string>();
    let answers = 0;
    for (const [index, [, body, headers]] of CASES.entries()) {
      const answer = await exchange(lean.port, ALLOW_STREAM, body(`seen-${index}`), headers);
      statuses.add(statusOf(answer));
      answers += framesOf(answer.data).length;
    }
    expect([...statuses].sort()).toEqual(['0', '13', '415', '8'].sort());
    expect(answers).toBeGreaterThanOrEqual(5);
  });
});
