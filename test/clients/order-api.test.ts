import { performance } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { stringify } from 'yaml';
import { parsePolicies } from '@quota-service/core';
import { MemoryStore } from '../../src/store/memory.js';
import { ALICE, API_KEY, BOB, post, type RunningApi, startOrderApi } from '../support/order-api.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();
const SECRETS = ['dev-token-alice', 'dev-token-bob', 'dev-key-acme-integration', 'wrong-token-123', 'wrong-key-456'];

describe.each(bothStores(redis))('POST /api/orders with the quota service on the %s store', (_store, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  let quota: QuotaClient;
  let api: RunningApi;
  let proxied: RunningApi;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await api?.app.close();
    await proxied?.app.close();
    await quota?.close();
    await service?.stop();
  });
  afterEach(async () => {
    await api?.app.close();
    await fixture.reset();
  });

  it('10 quick orders succeed (201 with the order); the 11th gets the 429 contract and runs no business logic; after Retry-After the next succeeds', async () => {
    api = await startOrderApi(quota);
    for (let i = 0; i < 10; i++) {
      const response = await post(api, ALICE);
      expect(response.status, `order ${i + 1}`).toBe(201);
      const order = (await response.json()) as Record<string, unknown>;
      expect(order).toMatchObject({ sku: 'widget', quantity: 1, user: 'alice', tenant: 'acme' });
      expect(response.headers.get('location')).toBe(`/api/orders/${String(order.id)}`);
    }
    expect([api.orders.stockReads, api.orders.writes, api.orders.count()]).toEqual([10, 10, 10]);

    const denied = await post(api, ALICE);
    expect(denied.status).toBe(429);
    expect(denied.headers.get('content-type')).toMatch(/^application\/json/);
    expect(denied.headers.get('retry-after')).toBe('1');
    // orders.create: every limit's status; the rejected request left the two windows as they were (10 spent each).
    expect(denied.headers.get('ratelimit')).toBe('"orders";r=0;t=1, "user-per-minute";r=110;t=60, "tenant-per-minute";r=1990;t=60');
    expect(denied.headers.get('ratelimit-policy')).toBe('"orders";q=10, "user-per-minute";q=120, "tenant-per-minute";q=2000');
    expect(await denied.json()).toEqual({
      error: 'rate_limit_exceeded',
      message: 'Too many requests: limit "orders" of policy "orders.create" is used up; try again in 1 s.',
      policy: 'orders.create',
      retry_after_ms: 500,
      limit: 'orders',
    });
    // No stock read, no write: the business layer never saw the rejected request.
    expect([api.orders.stockReads, api.orders.writes, api.orders.count()]).toEqual([10, 10, 10]);

    fixture.clock.advance(Number(denied.headers.get('retry-after')) * 1000);
    expect((await post(api, ALICE)).status).toBe(201);
    expect(api.orders.count()).toBe(11);
  });

  it('two users of one tenant have separate order buckets; an API key is a user of its own', async () => {
    api = await startOrderApi(quota);
    for (let i = 0; i < 10; i++) expect((await post(api, ALICE)).status).toBe(201);
    expect((await post(api, ALICE)).status).toBe(429);
    expect((await post(api, BOB)).status).toBe(201);
    const viaKey = await post(api, API_KEY);
    expect(viaKey.status).toBe(201);
    expect(await viaKey.json()).toMatchObject({ user: 'acme-integration', tenant: 'acme' });
  });

  it('two users of one tenant have separate order buckets; the tenant limit spans both', async () => {
    // orders.create with a tenant limit small enough to reach: 15 orders per minute per tenant.
    const small = await startTestService(
      fixture.store,
      parsePolicies(
        stringify({
          policies: {
            'orders.create': {
              limits: [
                { name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 },
                { name: 'user-per-minute', key_by: 'user', algorithm: 'fixed_window', limit: 120, window: 'minute' },
                { name: 'tenant-small', key_by: 'tenant', algorithm: 'fixed_window', limit: 15, window: 'minute' },
              ],
            },
            ip: { limits: [{ name: 'ip-per-minute', key_by: 'ip', algorithm: 'fixed_window', limit: 30, window: 'minute' }] },
            // Every order holds two in-flight leases, the user's and the tenant's (released when its answer is ready).
            'orders.in-flight.user': { limits: [{ name: 'user-orders-in-flight', key_by: 'user', algorithm: 'concurrency', limit: 5, lease_ttl_ms: 30_000 }] },
            'orders.in-flight': { limits: [{ name: 'tenant-orders-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 20, lease_ttl_ms: 30_000 }] },
          },
        }),
      ),
    );
    const smallQuota = createQuotaClient({ address: `127.0.0.1:${small.server.port}`, deadlineMs: 5_000 });
    try {
      api = await startOrderApi(smallQuota);
      // Alice empties her own bucket; Bob's is untouched by that.
      for (let i = 0; i < 10; i++) expect((await post(api, ALICE)).status).toBe(201);
      const alice = await post(api, ALICE);
      expect(alice.status).toBe(429);
      expect(await alice.json()).toMatchObject({ limit: 'orders' });
      for (let i = 0; i < 5; i++) expect((await post(api, BOB)).status, `bob ${i + 1}`).toBe(201);
      // 15 orders of acme: Bob still has tokens, but the tenant limit counts both users.
      const bob = await post(api, BOB);
      expect(bob.status).toBe(429);
      expect(await bob.json()).toMatchObject({ limit: 'tenant-small' });
      expect((await post(api, API_KEY)).status).toBe(429);
      // All or nothing: Bob's denied order took no token from his bucket (5 of 10 left; this
      // call, under another tenant, spends one more).
      const status = await smallQuota.allow({ policy: 'orders.create', identity: { user: 'bob', tenant: 'globex' } });
      expect(status.limits.find((l) => l.name === 'orders')?.remaining).toBe(4);
      expect(api.orders.count()).toBe(15);
    } finally {
      await smallQuota.close();
      await small.stop();
    }
  });

  it('missing or invalid credentials: 401, and the IP limit (30/min) still applies to them', async () => {
    api = await startOrderApi(quota);
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token-123' },
      { 'x-api-key': 'wrong-key-456' },
      { authorization: 'Basic abc' },
    ];
    for (let i = 0; i < 30; i++) {
      const response = await post(api, attempts[i % attempts.length]!);
      expect(response.status, `attempt ${i + 1}`).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    }
    const limited = await post(api, {});
    expect(limited.status).toBe(429);
    expect(await limited.json()).toMatchObject({ error: 'rate_limit_exceeded', policy: 'ip', limit: 'ip-per-minute' });
    // Authenticated users are not counted against their IP.
    expect((await post(api, ALICE)).status).toBe(201);
    expect(api.orders.stockReads).toBe(1);
    // No credential in any log line, valid or not.
    const text = api.logs.join('');
    expect(text).toContain('unauthenticated request');
    for (const secret of SECRETS) expect(text).not.toContain(secret);
  });

  it('X-Forwarded-For is ignored from an untrusted peer and keys the IP limit through a trusted proxy', async () => {
    api = await startOrderApi(quota);
    for (let i = 0; i < 30; i++) expect((await post(api, { 'x-forwarded-for': `203.0.113.${i}` })).status).toBe(401);
    expect((await post(api, { 'x-forwarded-for': '203.0.113.200' })).status).toBe(429);

    proxied = await startOrderApi(quota, { trustedProxies: ['loopback'] });
    for (let i = 0; i < 30; i++) expect((await post(proxied, { 'x-forwarded-for': '198.51.100.1' })).status).toBe(401);
    expect((await post(proxied, { 'x-forwarded-for': '198.51.100.1' })).status).toBe(429);
    expect((await post(proxied, { 'x-forwarded-for': '198.51.100.2' })).status).toBe(401);
    await proxied.app.close();
  });

  it('Idempotency-Key: a retry returns the first order, spends no second token, creates no second order', async () => {
    api = await startOrderApi(quota);
    const headers = { ...ALICE, 'idempotency-key': 'order-7f3a' };
    const first = await post(api, headers, { sku: 'widget', quantity: 2 });
    expect(first.status).toBe(201);
    const order = await first.json();
    const bucket = await fixture.tokenBucket('rl:v1:orders:user:{alice}');
    expect(bucket?.tokens).toBe(9);

    const retry = await post(api, headers, { sku: 'widget', quantity: 2 });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(order);
    expect((await fixture.tokenBucket('rl:v1:orders:user:{alice}'))?.tokens).toBe(9);
    expect([api.orders.count(), api.orders.writes, api.orders.stockReads]).toEqual([1, 1, 1]);

    const reused = await post(api, headers, { sku: 'widget', quantity: 3 });
    expect(reused.status).toBe(422);
    expect(await reused.json()).toMatchObject({ error: 'idempotency_key_reused' });
    // The same key of another user is another request.
    expect((await post(api, { ...BOB, 'idempotency-key': 'order-7f3a' }, { sku: 'widget', quantity: 2 })).status).toBe(201);
  });

  it('business outcomes: 400 names the field, 404 unknown sku, 409 out of stock', async () => {
    api = await startOrderApi(quota);
    const bad = await post(api, ALICE, { sku: 'widget', quantity: 0 });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'invalid_request', message: 'quantity: must be an integer from 1 to 100' });
    expect((await post(api, ALICE, { sku: 'nothing', quantity: 1 })).status).toBe(404);
    const out = await post(api, ALICE, { sku: 'gadget', quantity: 4 });
    expect(out.status).toBe(409);
    expect(await out.json()).toMatchObject({ error: 'out_of_stock' });
  });
});

describe('the quota service stopped', () => {
  const clients: QuotaClient[] = [];
  const apis: RunningApi[] = [];
  let port = 0;
  beforeAll(async () => {
    const service = await startTestService(new MemoryStore());
    port = service.server.port;
    await service.stop();
  });
  afterAll(async () => {
    await Promise.all(apis.map((a) => a.app.close()));
    await Promise.all(clients.map((c) => c.close()));
  });
  const apiWith = async (onUnavailable: 'fail_open' | 'fail_closed', deadlineMs: number) => {
    // As the order API's main does: the operator's choice applies to the in-flight lease too.
    const quota = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs, onUnavailable, leaseOnUnavailable: onUnavailable });
    clients.push(quota);
    const api = await startOrderApi(quota);
    apis.push(api);
    return api;
  };

  it('fail_closed: 503 rate_limiter_unavailable with Retry-After, no business logic, within the deadline', async () => {
    const deadlineMs = 1_000;
    const api = await apiWith('fail_closed', deadlineMs);
    const started = performance.now();
    const response = await post(api, ALICE);
    const elapsed = performance.now() - started;
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    // The user's in-flight lease is the first quota call of an order: it fails closed first.
    expect(await response.json()).toMatchObject({ error: 'rate_limiter_unavailable', policy: 'orders.in-flight.user' });
    expect(api.orders.stockReads).toBe(0);
    // One quota call (an authenticated user skips the IP limit; the user's lease refused, neither the tenant's lease nor a rate limit is asked), bounded by the deadline; loose bound, shared machine.
    expect(elapsed).toBeLessThan(2 * deadlineMs);
  });

  it('fail_open: orders proceed, within the deadline', async () => {
    const deadlineMs = 1_000;
    const api = await apiWith('fail_open', deadlineMs);
    const started = performance.now();
    const response = await post(api, ALICE);
    expect(response.status).toBe(201);
    expect(performance.now() - started).toBeLessThan(2 * deadlineMs);
    expect(api.orders.count()).toBe(1);
  });
});
