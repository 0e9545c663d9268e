import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { ALICE, API_KEY, BOB, post, type RunningApi, startOrderApi } from '../support/order-api.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { memoryFixture } from '../support/store-fixtures.js';

const CAROL = { authorization: 'Bearer dev-token-carol' };
const NO_SUCH_ORDER = { error: 'not_found', message: 'No such order.' };

describe('GET /api/orders/:id, the Location of a created order', () => {
  const fixture = memoryFixture();
  let service: TestService;
  let quota: QuotaClient;
  let api: RunningApi;
  beforeAll(async () => {
    service = await startTestService(fixture.store);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await api?.app.close();
    await quota?.close();
    await service?.stop();
  });
  afterEach(async () => {
    await api?.app.close();
    await fixture.reset();
  });

  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${api.url}${path}`, { headers });

  it("the 201's Location answers 200 with that order to its own user, by token or by API key", async () => {
    api = await startOrderApi(quota);
    for (const credentials of [ALICE, API_KEY]) {
      const created = await post(api, credentials, { sku: 'widget', quantity: 2 });
      expect(created.status).toBe(201);
      const order = await created.json();
      const read = await get(created.headers.get('location')!, credentials);
      expect(read.status).toBe(200);
      expect(read.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await read.json()).toEqual(order);
    }
  });

  it("another user's order is a 404 like an unknown id (same tenant or not), so ids cannot be probed", async () => {
    api = await startOrderApi(quota);
    const location = (await post(api, ALICE)).headers.get('location')!;
    const answers = [
      await get(location, BOB),
      await get(location, CAROL),
      await get(location, API_KEY),
      await get('/api/orders/00000000-0000-4000-8000-000000000000', ALICE),
    ];
    expect(answers.map((r) => r.status)).toEqual([404, 404, 404, 404]);
    for (const answer of answers) expect(await answer.json()).toEqual(NO_SUCH_ORDER);
    expect((await get(location, ALICE)).status).toBe(200);
  });

  it('without valid credentials: 401, counted with unauthenticated POSTs against the IP limit (30/min), then 429', async () => {
    api = await startOrderApi(quota);
    const location = (await post(api, ALICE)).headers.get('location')!;
    for (let i = 0; i < 30; i++) {
      const response = i % 2 === 0 ? await get(location, i % 4 === 0 ? {} : { authorization: 'Bearer wrong-token-123' }) : await post(api, {});
      expect(response.status, `attempt ${i + 1}`).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    }
    const limited = await get(location);
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ error: 'rate_limit_exceeded', policy: 'ip', limit: 'ip-per-minute' });
    // The owner is not counted against the address.
    expect((await get(location, ALICE)).status).toBe(200);
  });

  it('reading orders spends nothing of the order limit', async () => {
    api = await startOrderApi(quota);
    const location = (await post(api, ALICE)).headers.get('location')!;
    for (let i = 0; i < 20; i++) expect((await get(location, ALICE)).status).toBe(200);
    for (let i = 0; i < 9; i++) expect((await post(api, ALICE)).status, `order ${i + 2}`).toBe(201);
    expect((await post(api, ALICE)).status).toBe(429);
    expect((await get(location, ALICE)).status).toBe(200);
  });
});
