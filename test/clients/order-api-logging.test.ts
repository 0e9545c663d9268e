import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { ALICE, type RunningApi, startOrderApi } from '../support/order-api.js';
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
      { method: 'GET', url: '/api/orders', host: expect.any(String), remoteAddress: '127.0.0.1', remotePort: expect.any(Number) },
    ]);
    const completed = lines.filter((l) => l.msg === 'request completed').map((l) => (l.res as { statusCode: number }).statusCode);
    expect(completed).toEqual([401, 401, 401, 201, 404]);
    const unauthenticated = lines.filter((l) => l.msg === 'unauthenticated request').map((l) => [l.auth, l.scheme]);
    expect(unauthenticated).toEqual([
      ['none', undefined],
      ['invalid', 'bearer'],
      ['invalid', 'api_key'],
    ]);
  });
});
