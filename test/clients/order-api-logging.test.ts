import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { OrderStore } from '../../clients/order-api/order-store.js';
import { ALICE, post, type RunningApi, startOrderApi } from '../support/order-api.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { memoryFixture } from '../support/store-fixtures.js';

// Credentials sent where they do not belong (the query string) and where they do
// (headers), valid or not: none of them may reach a log line.
const SECRETS = ['SECRET-QUERY-KEY', 'SECRET-QUERY-TOKEN', 'SECRET-HEADER-TOKEN', 'SECRET-HEADER-KEY', 'SECRET-404', 'SECRET-RAW', 'dev-token-alice'];

/** Bytes Node's HTTP parser refuses (a header line without a colon); resolves when the server has answered and closed. */
function sendMalformed(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.end(bytes));
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

/** JSON.parse reviver: a logged Buffer ({"type":"Buffer","data":[...]}) becomes its text, so a secret in it shows. */
function bytesAsText(_key: string, value: unknown): unknown {
  const buffer = value as { type?: unknown; data?: unknown };
  return buffer?.type === 'Buffer' && Array.isArray(buffer.data) ? Buffer.from(buffer.data as number[]).toString('latin1') : value;
}

describe('order API request logs', () => {
  let service: TestService;
  let quota: QuotaClient;
  let api: RunningApi;
  beforeAll(async () => {
    service = await startTestService(memoryFixture().store);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
    api = await startOrderApi(quota, {}, undefined, 'trace');
  });
  afterAll(async () => {
    await api?.app.close();
    await quota?.close();
    await service?.stop();
  });

  it('log the path without its query string and never a credential, from the URL or from headers', async () => {
    const order = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sku: 'widget', quantity: 1 }) };
    const inQuery = await fetch(`${api.url}/api/orders?api_key=SECRET-QUERY-KEY&access_token=SECRET-QUERY-TOKEN`, order);
    expect(inQuery.status).toBe(401);
    const inHeaders: Record<string, string>[] = [{ authorization: 'Bearer SECRET-HEADER-TOKEN' }, { 'x-api-key': 'SECRET-HEADER-KEY' }];
    for (const headers of inHeaders) {
      const response = await fetch(`${api.url}/api/orders`, { ...order, headers: { ...order.headers, ...headers } });
      expect(response.status).toBe(401);
    }
    const valid = await fetch(`${api.url}/api/orders?access_token=dev-token-alice`, { ...order, headers: { ...order.headers, ...ALICE } });
    expect(valid.status).toBe(201);
    const location = valid.headers.get('location')!;
    const read = await fetch(`${api.url}${location}?access_token=dev-token-alice`, { headers: ALICE });
    expect(read.status).toBe(200);
    // No route: the answer is the API's own JSON, the query string is neither echoed nor logged.
    const missing = await fetch(`${api.url}/api/orders?api_key=SECRET-404`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'not_found', message: 'No such route: the API serves POST /api/orders and GET /api/orders/<id>.' });
    // A request the HTTP parser refuses: its raw bytes stay out of the log.
    const refused = await sendMalformed(api.url, 'GET /api/orders?api_key=SECRET-RAW HTTP/1.1\r\nHost: x\r\nX-API-Key SECRET-RAW\r\n\r\n');
    expect(refused).toMatch(/^HTTP\/1\.1 400 /);

    const lines = api.logs.map((line) => JSON.parse(line, bytesAsText) as Record<string, unknown>);
    for (const line of lines) {
      const text = JSON.stringify(line);
      for (const secret of SECRETS) expect(text).not.toContain(secret);
      expect(text).not.toContain('?');
    }
    expect(lines.filter((l) => l.msg === 'client error')).toHaveLength(1);
    const incoming = lines.filter((l) => l.msg === 'incoming request').map((l) => l.req);
    expect(incoming).toEqual([
      { method: 'POST', url: '/api/orders', host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
      { method: 'POST', url: '/api/orders', host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
      { method: 'POST', url: '/api/orders', host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
      { method: 'POST', url: '/api/orders', host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
      { method: 'GET', url: location, host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
      { method: 'GET', url: '/api/orders', host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
    ]);
    const completed = lines.filter((l) => l.msg === 'request completed').map((l) => (l.res as { statusCode: number }).statusCode);
    expect(completed).toEqual([401, 401, 401, 201, 200, 404]);
    const unauthenticated = lines.filter((l) => l.msg === 'unauthenticated request').map((l) => [l.auth, l.scheme]);
    expect(unauthenticated).toEqual([
      ['none', undefined],
      ['invalid', 'bearer'],
      ['invalid', 'api_key'],
    ]);
  });
});

type LogLine = Record<string, unknown> & { level: number; msg: string };

describe('order API logs at the default level (info)', () => {
  let service: TestService;
  let quota: QuotaClient;
  let api: RunningApi;
  let failWrites = false;
  beforeAll(async () => {
    service = await startTestService(memoryFixture().store);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
    const orders = new OrderStore({ widget: 1000, gadget: 0 }, async () => {
      if (failWrites) throw new Error('orders database unreachable');
    });
    api = await startOrderApi(quota, {}, orders, 'info');
  });
  afterAll(async () => {
    await api?.app.close();
    await quota?.close();
    await service?.stop();
  });
  const lines = () => api.logs.map((line) => JSON.parse(line) as LogLine);
  const since = (start: number) => lines().slice(start);

  it('requests without a notable outcome (200, 400, 404, 409) write no line; a created order, a 401, a 429 and a 500 one each', async () => {
    const started = lines().length;
    const created = await post(api, ALICE);
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    expect(since(started)).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'request completed',
        req: expect.objectContaining({ method: 'POST', url: '/api/orders' }),
        res: { statusCode: 201 },
      }),
    ]);

    const quiet = lines().length;
    const CAROL = { authorization: 'Bearer dev-token-carol' };
    const requests = [
      () => fetch(`${api.url}${location}?access_token=dev-token-alice`, { headers: ALICE }),
      () => fetch(`${api.url}/api/orders`, { method: 'POST', headers: { ...ALICE, 'content-type': 'application/json' }, body: '{"sku": ' }),
      () => fetch(`${api.url}/api/orders`, { method: 'POST', headers: { ...ALICE, 'content-type': 'application/xml' }, body: '<order/>' }),
      () => fetch(`${api.url}/nothing-here?api_key=SECRET-404`),
    ];
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const response = await requests[i % requests.length]!();
      statuses.push(response.status);
      await response.body?.cancel();
    }
    // Business refusals too (each spends one of Carol's 10 tokens).
    for (const body of [
      { sku: 'widget', quantity: 0 },
      { sku: 'nothing', quantity: 1 },
      { sku: 'gadget', quantity: 1 },
    ]) {
      statuses.push((await post(api, CAROL, body)).status);
    }
    expect(statuses.slice(0, 4)).toEqual([200, 400, 415, 404]);
    expect(statuses.slice(-3)).toEqual([400, 404, 409]);
    expect(since(quiet)).toEqual([]);

    // A 401: the kind of failure, once.
    let start = lines().length;
    expect((await post(api, { authorization: 'Bearer SECRET-HEADER-TOKEN' })).status).toBe(401);
    expect(since(start).map((l) => [l.level, l.msg])).toEqual([[30, 'unauthenticated request']]);

    // Alice's order bucket (10) runs out: each order one line, the denial one line.
    for (let i = 0; i < 9; i++) expect((await post(api, ALICE)).status).toBe(201);
    start = lines().length;
    const denied = await post(api, ALICE);
    expect(denied.status).toBe(429);
    expect(since(start)).toEqual([expect.objectContaining({ level: 30, msg: 'request completed', res: { statusCode: 429 } })]);

    // A failure on our side: the error and the request's line.
    failWrites = true;
    start = lines().length;
    expect((await post(api, { authorization: 'Bearer dev-token-bob' })).status).toBe(500);
    failWrites = false;
    expect(since(start)).toEqual([
      expect.objectContaining({ level: 50, msg: 'request failed', err: expect.objectContaining({ message: 'orders database unreachable' }) }),
      expect.objectContaining({
        level: 30,
        msg: 'request completed',
        req: expect.objectContaining({ method: 'POST', url: '/api/orders' }),
        res: { statusCode: 500 },
      }),
    ]);

    expect(lines().filter((l) => l.msg === 'incoming request')).toEqual([]);
    for (const line of api.logs) {
      for (const secret of SECRETS) expect(line).not.toContain(secret);
      expect(line).not.toContain('?');
    }
  });
});
