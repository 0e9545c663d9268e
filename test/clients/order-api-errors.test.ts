import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { Credentials } from '../../clients/order-api/credentials.js';
import { OrderStore } from '../../clients/order-api/order-store.js';
import { ALICE, post, type RunningApi, startOrderApi } from '../support/order-api.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { memoryFixture, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();
/** The ip policy of config/policies.yaml: 30 unauthenticated requests per minute per client address. */
const IP_LIMIT = 30;
const INTERNAL_TEXT = /INVALID_ARGUMENT|identity\.ip|bytes|control characters/;

describe.each(bothStores(redis))('order API behind a trusted proxy, X-Forwarded-For that is no address, on the %s store', (_store, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  let quota: QuotaClient;
  let proxied: RunningApi;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
    proxied = await startOrderApi(quota, { trustedProxies: ['loopback'] });
  });
  afterAll(async () => {
    await proxied?.app.close();
    await quota?.close();
    await service?.stop();
  });
  afterEach(async () => {
    await fixture.reset();
  });

  it.each([
    ['300 bytes of garbage', 'g'.repeat(300)],
    ['a TAB', '198.51.100.7\t203.0.113.9'],
  ])('%s: the proxy is the client, 30 × 401 then 429, never a 500', async (_name, forwarded) => {
    const statuses: number[] = [];
    const bodies: string[] = [];
    for (let i = 0; i < 40; i++) {
      const response = await post(proxied, { 'x-forwarded-for': forwarded });
      statuses.push(response.status);
      bodies.push(await response.text());
    }
    expect(statuses).toEqual([...Array(IP_LIMIT).fill(401), ...Array(40 - IP_LIMIT).fill(429)]);
    for (const body of bodies) expect(body).not.toMatch(INTERNAL_TEXT);
    // The proxy's own address was counted: without the header it is over the limit too.
    const direct = await post(proxied, {});
    expect(direct.status).toBe(429);
    expect(await direct.json()).toMatchObject({ error: 'rate_limit_exceeded', policy: 'ip', limit: 'ip-per-minute' });
  });
});

describe('order API error answers', () => {
  const fixture = memoryFixture();
  let service: TestService;
  let quota: QuotaClient;
  let directory: string;
  const apis: RunningApi[] = [];
  beforeAll(async () => {
    service = await startTestService(fixture.store);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
    directory = await mkdtemp(join(tmpdir(), 'order-api-'));
  });
  afterAll(async () => {
    await Promise.all(apis.map((api) => api.app.close()));
    await quota?.close();
    await service?.stop();
    await rm(directory, { recursive: true, force: true });
  });
  const start = async (...args: Parameters<typeof startOrderApi> extends [unknown, ...infer Rest] ? Rest : never) => {
    const api = await startOrderApi(quota, ...args);
    apis.push(api);
    return api;
  };

  it('a principal the quota service refuses (a user name over 256 bytes): 400 invalid_request naming the field; no business logic runs', async () => {
    const path = join(directory, 'credentials.yaml');
    await writeFile(path, stringify({ bearer_tokens: { 'token-of-a-long-name': { user: 'ü'.repeat(200), tenant: 'acme' } } }));
    const api = await start({ credentials: await Credentials.load(path) });
    const response = await post(api, { authorization: 'Bearer token-of-a-long-name' });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: 'invalid_request', message: 'identity.user: not accepted by the rate limiter' });
    expect(api.orders.stockReads).toBe(0);
  });

  it('an unexpected error: a generic 500 JSON without its text, which goes to the log', async () => {
    const failing = new OrderStore({ widget: 10 }, async () => {
      throw new Error('orders database at 10.9.8.7: password authentication failed');
    });
    const api = await start({}, failing);
    const response = await post(api, ALICE);
    expect(response.status).toBe(500);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: 'internal_error', message: 'The request failed on our side; try again later.' });
    const logged = api.logs.map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message: string } }).filter((l) => l.level === 50);
    expect(logged).toEqual([
      expect.objectContaining({ msg: 'request failed', err: expect.objectContaining({ message: expect.stringContaining('password authentication failed') }) }),
    ]);
  });

  it("a body Fastify cannot read: its 4xx in the API's shape", async () => {
    const api = await start();
    const notJson = await fetch(`${api.url}/api/orders`, { method: 'POST', headers: { ...ALICE, 'content-type': 'application/json' }, body: '{"sku": ' });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual({ error: 'invalid_request', message: "Body is not valid JSON but content-type is set to 'application/json'" });
    const otherType = await fetch(`${api.url}/api/orders`, { method: 'POST', headers: { ...ALICE, 'content-type': 'application/xml' }, body: '<order/>' });
    expect(otherType.status).toBe(415);
    expect(await otherType.json()).toMatchObject({ error: 'invalid_request' });
    expect(api.orders.stockReads).toBe(0);
  });
});
