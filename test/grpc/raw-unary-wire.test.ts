import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { AllowRequest, AllowResponse } from '@quota-service/contract';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseRlsConfig } from '../../src/api/envoy/rls-config.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { RawUnaryCall } from '../../src/grpc/raw-unary.js';
import { createLogger } from '../../src/logger.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { QuotaStore } from '../../src/store/store.js';
import { HangingStore } from '../support/hanging-store.js';
import { shippedPolicies } from '../support/quota-service.js';
import { exchange as exchangeFrames, framed, oversized, type WireExchange } from '../support/grpc-wire.js';
import { rlsRequestBytes, rlsResponseOf } from '../support/rls-client.js';

// The lean path reads Allow and ShouldRateLimit off the HTTP/2 stream itself (src/grpc/raw-unary.ts)
// and leaves to grpc-js what it does not read the same way. Each case here goes to both servers as
// HTTP/2 frames, and both must send the same frames back: headers, data and trailers.

const ALLOW = '/quota.v1.QuotaService/Allow';
const SRL = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const RLS = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

interface WireAnswer extends Omit<WireExchange, 'data'> {
  /** The framing as sent (its flag, and whether it declares its length), the answer decoded without what moves with the clock. */
  data: unknown;
}

async function serve(lean: boolean, store: QuotaStore = new MemoryStore()): Promise<QuotaServer> {
  const server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), store),
    address: '127.0.0.1:0',
    logger: createLogger('silent'),
    rls: { config: () => parseRlsConfig(new Map([['edge.yaml', RLS]])), timeoutMs: 50, shadowMode: false, rateLimitHeaders: false },
    lean,
  });
  server.setServing(true);
  return server;
}

/** Sends one request as HTTP/2 frames and reads the whole answer, its message decoded. */
async function exchange(server: QuotaServer, path: string, body: Buffer, headers: Record<string, string> = {}): Promise<WireAnswer> {
  const answer = await exchangeFrames(server.port, path, body, headers);
  return { ...answer, data: timeless(path, answer.data) };
}

function timeless(path: string, bytes: Buffer): unknown {
  if (bytes.length < 5) return bytes.toString('hex');
  const message = bytes.subarray(5);
  // The framing: its flag, and a length that is the message's (the message's own length moves with the clock: a time until reset).
  const prefix = { flag: bytes[0], declaresItsLength: bytes.readUInt32BE(1) === message.length };
  if (path === ALLOW) {
    const answer = AllowResponse.decode(message);
    return { prefix, answer: { ...answer, limits: answer.limits.map((limit) => ({ ...limit, resetAfterMs: 0 })) } };
  }
  const answer = JSON.parse(JSON.stringify(rlsResponseOf(message), (key, value: unknown) => (key === 'duration_until_reset' ? undefined : value)));
  return { prefix, answer };
}

const allowBytes = (user: string) =>
  AllowRequest.encode({ policy: 'orders', identity: { user }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }).finish();
const srlBytes = (key: string) => rlsRequestBytes({ domain: 'edge', descriptors: [{ entries: [{ key: 'api_key', value: key }] }] });
// Each case names its own identity so both servers see it fresh (the decisions then match).
const CASES: Array<[name: string, path: string, body: (id: string) => Buffer, headers: Record<string, string>]> = [
  ['an Allow', ALLOW, (id) => framed(allowBytes(id)), {}],
  ['a ShouldRateLimit with a timeout', SRL, (id) => framed(srlBytes(id)), { 'grpc-timeout': '2S' }],
  ['an Allow compressed with gzip', ALLOW, (id) => framed(gzipSync(allowBytes(id)), 1), { 'grpc-encoding': 'gzip' }],
  ['an Allow with an encoding grpc-js does not know', ALLOW, (id) => framed(allowBytes(id), 1), { 'grpc-encoding': 'snappy' }],
  ['an Allow whose content type is not gRPC', ALLOW, (id) => framed(allowBytes(id)), { 'content-type': 'application/json' }],
  ['an Allow with a malformed timeout', ALLOW, (id) => framed(allowBytes(id)), { 'grpc-timeout': 'soon' }],
  ['an Allow with two messages', ALLOW, (id) => Buffer.concat([framed(allowBytes(id)), framed(allowBytes(id))]), {}],
  ['an Allow with no message', ALLOW, () => Buffer.alloc(0), {}],
  ['an Allow with half a frame', ALLOW, (id) => framed(allowBytes(id)).subarray(0, 9), {}],
  ['an Allow declared larger than the limit', ALLOW, oversized, {}],
  ['an Allow that is no message', ALLOW, () => framed(Buffer.from([0x0a, 0xff, 0xff])), {}],
  ['an Allow with the flag of a compressed message and no encoding', ALLOW, (id) => framed(allowBytes(id), 1), {}],
];

describe('the lean unary path sends the frames grpc-js sends', () => {
  let lean: QuotaServer;
  let middleware: QuotaServer;
  beforeAll(async () => {
    [lean, middleware] = await Promise.all([serve(true), serve(false)]);
  });
  afterAll(async () => {
    await Promise.all([lean.shutdown(1_000), middleware.shutdown(1_000)]);
  });

  CASES.forEach(([name, path, body, headers], index) => {
    it(name, async () => {
      const request = body(`wire-${index}`);
      const [fromLean, fromMiddleware] = [await exchange(lean, path, request, headers), await exchange(middleware, path, request, headers)];
      expect(fromLean).toEqual(fromMiddleware);
    });
  });

  it('reads Allow and ShouldRateLimit off the stream itself on the lean path, and only there', async () => {
    // What the comparisons above compare: the lean server's answers come from raw-unary.ts, not from grpc-js.
    const run = vi.spyOn(RawUnaryCall.prototype as unknown as { run(request: unknown): void }, 'run');
    try {
      await exchange(lean, ALLOW, framed(allowBytes('taken')));
      await exchange(lean, SRL, framed(srlBytes('taken')));
      expect(run).toHaveBeenCalledTimes(2);
      await exchange(middleware, ALLOW, framed(allowBytes('not-taken')));
      await exchange(lean, ALLOW, framed(gzipSync(allowBytes('compressed')), 1), { 'grpc-encoding': 'gzip' });
      expect(run).toHaveBeenCalledTimes(2);
    } finally {
      run.mockRestore();
    }
  });

  it('answers the cases differently (the comparison means something)', async () => {
    const statuses = new Set<unknown>();
    for (const [index, [, path, body, headers]] of CASES.entries()) {
      const answer = await exchange(lean, path, body(`seen-${index}`), headers);
      statuses.add(answer.trailers['grpc-status'] ?? answer.headers['grpc-status'] ?? answer.headers[':status']);
    }
    expect([...statuses].map(String).sort()).toEqual(['0', '12', '13', '415', '8'].sort());
  });
});

describe('the lean unary path when the caller gives up', () => {
  let lean: QuotaServer;
  const store = new HangingStore();
  beforeAll(async () => {
    lean = await serve(true, store);
  });
  afterAll(async () => {
    await store.close();
    await lean.shutdown(1_000);
  });

  it('a timeout ends the call with DEADLINE_EXCEEDED, and a reset call leaves the server serving', async () => {
    const timedOut = await exchange(lean, ALLOW, framed(allowBytes('late')), { 'grpc-timeout': '100m' });
    expect(timedOut.headers['grpc-status'] ?? timedOut.trailers['grpc-status']).toBe('4');
    expect(decodeURIComponent(String(timedOut.headers['grpc-message'] ?? timedOut.trailers['grpc-message']))).toBe('Deadline exceeded');

    const session = http2.connect(`http://127.0.0.1:${lean.port}`);
    session.on('error', () => {});
    const stream = session.request({ ':method': 'POST', ':path': ALLOW, 'content-type': 'application/grpc', te: 'trailers' });
    stream.on('error', () => {});
    const asked = store.asked;
    stream.end(framed(allowBytes('gives-up')));
    await vi.waitFor(() => expect(store.asked).toBe(asked + 1));
    stream.close(http2.constants.NGHTTP2_CANCEL);
    await new Promise((resolve) => stream.on('close', resolve));
    session.close();

    const after = await exchange(lean, SRL, framed(srlBytes('after')), {});
    // ShouldRateLimit's budget (50 ms) runs out on the store that never answers: the failure mode answers.
    expect(after.headers['grpc-status'] ?? after.trailers['grpc-status']).toBe('14');
  });
});
