import { Writable } from 'node:stream';
import { Client, credentials, Metadata, status } from '@grpc/grpc-js';
import { AllowRequest, AllowResponse } from '@quota-service/contract';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseCallers } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createLogger } from '../../src/logger.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { parseRlsConfig } from '../../src/api/envoy/rls-config.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { QuotaStore } from '../../src/store/store.js';
import { HangingStore } from '../support/hanging-store.js';
import { shippedPolicies } from '../support/quota-service.js';
import { rlsRequestBytes, rlsResponseOf } from '../support/rls-client.js';

// Allow and ShouldRateLimit are served on the lean path (src/grpc/raw-unary.ts, read off the HTTP/2 stream) by default, and
// through nice-grpc's middleware with `lean: false`. Each case here is sent to both, as raw
// bytes, and both must answer the same: status, message, trailers, answer bytes, debug log lines.

const TOKEN = 'lean-unary-token-5d1c9e7a3b2f4068';
const CALLERS = `
callers:
  api:
    token: ${TOKEN}
    policies: [orders]
    domains: [edge]
`;
const RLS = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;
const ALLOW = '/quota.v1.QuotaService/Allow';
const SRL = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

interface Answer {
  code: number;
  details: string;
  trailers: Record<string, unknown>;
  /** The answer decoded, without what moves with the clock (times until a reset). */
  answer: unknown;
}

interface Served {
  server: QuotaServer;
  client: Client;
  lines: string[];
  store: QuotaStore;
}

async function serve(lean: boolean, store: QuotaStore = new MemoryStore()): Promise<Served> {
  const lines: string[] = [];
  const logger = createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  const server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), store),
    address: '127.0.0.1:0',
    logger,
    callers: parseCallers(CALLERS),
    admission: { total: 100, perCaller: 1 },
    rls: { config: () => parseRlsConfig(new Map([['edge.yaml', RLS]])), timeoutMs: 50, shadowMode: false, rateLimitHeaders: true },
    lean,
  });
  server.setServing(true);
  return { server, client: new Client(`127.0.0.1:${server.port}`, credentials.createInsecure()), lines, store };
}

function call(served: Served, path: string, body: Uint8Array, headers: Record<string, string> = {}, deadlineMs?: number): Promise<Answer> {
  const metadata = new Metadata();
  for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
  return new Promise((resolve) => {
    let trailers: Record<string, unknown> = {};
    const pending = served.client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(body),
      metadata,
      deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs },
      (error, response) =>
        // The status arrives after the callback's error for a failed call: wait for it.
        setImmediate(() =>
          resolve({
            code: error?.code ?? status.OK,
            details: error?.details ?? 'OK',
            trailers,
            answer: response === undefined ? undefined : timeless(path, response),
          }),
        ),
    );
    pending.on('status', (s) => {
      // A Trailers-Only answer carries the response headers too; the date moves with the clock.
      const { date: _date, ...rest } = s.metadata.getMap();
      trailers = rest;
    });
  });
}

function timeless(path: string, bytes: Buffer): unknown {
  // What moves with the clock between the two calls is not compared: a window's end, a retry in ms,
  // a bucket's refill (fractions of a token).
  const moving = (text: string) => text.replace(/\d+\.\d+|\d{4,}/g, '#').replace(/t=\d+/g, 't=?');
  const text = JSON.stringify(path === ALLOW ? AllowResponse.decode(bytes) : rlsResponseOf(bytes), (key, value: unknown) => {
    if (key === 'duration_until_reset' || key === 'resetAfterMs') return undefined;
    // A Buffer reaches the replacer as its toJSON: { type: 'Buffer', data }.
    if (value instanceof Uint8Array) return moving(Buffer.from(value).toString());
    const buffer = value as { type?: unknown; data?: number[] };
    if (buffer?.type === 'Buffer' && Array.isArray(buffer.data)) return moving(Buffer.from(buffer.data).toString());
    if (typeof value === 'number' && (!Number.isInteger(value) || value >= 1000)) return '#';
    if (typeof value === 'string') return moving(value);
    return typeof value === 'bigint' ? moving(String(value)) : value;
  });
  return JSON.parse(text);
}

const bearer = { authorization: `Bearer ${TOKEN}` };
const allow = (fields: Partial<AllowRequest>) =>
  AllowRequest.encode({ policy: 'orders', identity: { user: 'u1' }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0, ...fields }).finish();
/** An identity value whose bytes are not UTF-8: the strict decoder refuses it. */
function invalidUtf8Allow(): Uint8Array {
  const bytes = Buffer.from(allow({ identity: { user: 'uX' } }));
  bytes[bytes.indexOf(Buffer.from('uX')) + 1] = 0xff;
  return bytes;
}

const CASES: Array<[name: string, path: string, body: () => Uint8Array, headers: Record<string, string>]> = [
  ['Allow without a token', ALLOW, () => allow({}), {}],
  ['Allow with an unknown token', ALLOW, () => allow({}), { authorization: 'Bearer nobody-knows-this-token' }],
  ['Allow with a token but no "Bearer"', ALLOW, () => allow({}), { authorization: TOKEN }],
  ['Allow of a policy outside the caller’s list', ALLOW, () => allow({ policy: 'user' }), bearer],
  ['Allow, decided', ALLOW, () => allow({ requestId: 'r-1' }), bearer],
  ['Allow, the same request id again', ALLOW, () => allow({ requestId: 'r-1' }), bearer],
  ['Allow with a bad cost', ALLOW, () => allow({ cost: -3 }), bearer],
  ['Allow with no identity', ALLOW, () => allow({ identity: {} }), bearer],
  ['Allow with invalid UTF-8', ALLOW, invalidUtf8Allow, bearer],
  ['Allow with bytes that are no message', ALLOW, () => Buffer.from([0x0a, 0xff, 0xff]), bearer],
  ['ShouldRateLimit without a token', SRL, () => rlsRequestBytes({ domain: 'edge', descriptors: [] }), {}],
  ['ShouldRateLimit of a domain outside the caller’s list', SRL, () => rlsRequestBytes({ domain: 'other', descriptors: [] }), bearer],
  ...[1, 2, 3].map((n): (typeof CASES)[number] => [
    `ShouldRateLimit, hit ${n} of a limit of 2`,
    SRL,
    () => rlsRequestBytes({ domain: 'edge', descriptors: [{ entries: [{ key: 'api_key', value: 'k' }] }] }),
    bearer,
  ]),
  ['ShouldRateLimit with an empty domain', SRL, () => rlsRequestBytes({ domain: '', descriptors: [] }), bearer],
];

/** Log lines without what differs between two servers by nature: time, pid, the call's duration. */
const comparable = (lines: string[]) =>
  lines.map((line) => {
    const { time: _t, pid: _p, hostname: _h, ms: _m, ...rest } = JSON.parse(line) as Record<string, unknown>;
    return rest;
  });

describe('the lean unary path answers as the middleware path does', () => {
  let lean: Served;
  let middleware: Served;
  beforeAll(async () => {
    [lean, middleware] = await Promise.all([serve(true), serve(false)]);
  });
  afterAll(async () => {
    for (const served of [lean, middleware]) {
      served.client.close();
      await served.server.shutdown(1_000);
    }
  });

  // The wall clock stands still during each case, so that what a window's end sets (Retry-After, the
  // body's "try again in N s") is the same for both calls and compared exactly, even when a second
  // turns between them. Only Date is frozen: timers and the sockets run as ever.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  for (const [name, path, body, headers] of CASES) {
    it(name, async () => {
      const request = body();
      lean.lines.length = 0;
      middleware.lines.length = 0;
      const [fromLean, fromMiddleware] = [await call(lean, path, request, headers), await call(middleware, path, request, headers)];
      expect(fromLean).toEqual(fromMiddleware);
      expect(comparable(lean.lines)).toEqual(comparable(middleware.lines));
    });
  }

  it('sends every case a real answer (not all alike): the comparison means something', async () => {
    const codes = new Set<number>();
    for (const [, path, body, headers] of CASES) codes.add((await call(lean, path, body(), headers)).code);
    expect([...codes].sort()).toEqual([status.OK, status.INVALID_ARGUMENT, status.INTERNAL, status.PERMISSION_DENIED, status.UNAUTHENTICATED].sort());
  });
});

describe('the lean unary path under a store that never answers', () => {
  let lean: Served;
  let middleware: Served;
  beforeAll(async () => {
    [lean, middleware] = await Promise.all([serve(true, new HangingStore()), serve(false, new HangingStore())]);
  });
  afterAll(async () => {
    for (const served of [lean, middleware]) {
      served.client.close();
      await served.store.close();
      await served.server.shutdown(1_000);
    }
  });

  it('the caller’s deadline sizes the store budget, and ends a call, the same way on both', async () => {
    const srl = rlsRequestBytes({ domain: 'edge', descriptors: [{ entries: [{ key: 'api_key', value: 'k' }] }] });
    // ShouldRateLimit reads the deadline: the store gets three quarters of it (at most a second), then
    // the failure mode (here: fail closed, the service's default) answers while the caller still waits.
    const started = performance.now();
    const timed = (served: Served) => call(served, SRL, srl, bearer, 2_000).then((answer) => ({ answer, ms: performance.now() - started }));
    const [{ answer: srlLean, ms: leanMs }, { answer: srlMiddleware, ms: middlewareMs }] = await Promise.all([timed(lean), timed(middleware)]);
    // Not the 50 ms the service gives a caller without a deadline: the budget came from this one.
    expect(Math.min(leanMs, middlewareMs)).toBeGreaterThan(700);
    expect(srlLean.code).toBe(status.UNAVAILABLE);
    expect(srlLean).toEqual(srlMiddleware);
    // Allow waits for the store: the deadline ends it (and its decision stays pending, holding its place).
    const [fromLean, fromMiddleware] = [await call(lean, ALLOW, allow({}), bearer, 100), await call(middleware, ALLOW, allow({}), bearer, 100)];
    expect([fromLean.code, fromMiddleware.code]).toEqual([status.DEADLINE_EXCEEDED, status.DEADLINE_EXCEEDED]);
  });

  it('a caller over its share of pending decisions is shed with the same status and retry trailer', async () => {
    const [fromLean, fromMiddleware] = [await call(lean, ALLOW, allow({}), bearer), await call(middleware, ALLOW, allow({}), bearer)];
    expect(fromLean.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(fromLean.trailers).toHaveProperty('retry-after-ms');
    expect(fromLean).toEqual(fromMiddleware);
  });
});
