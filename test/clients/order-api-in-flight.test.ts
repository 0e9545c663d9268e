import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { parsePolicies } from '@quota-service/core';
import { OrderStore } from '../../clients/order-api/order-store.js';
import { ALICE, API_KEY, BOB, post, type RunningApi, startOrderApi } from '../support/order-api.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();
const CAROL = { authorization: 'Bearer dev-token-carol' };

/** Roomy rate limits and user shares, so only the in-flight cap (2 orders per tenant) can refuse. */
const POLICIES = parsePolicies(
  stringify({
    policies: {
      'orders.create': { limits: [{ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 100, refill_per_second: 100 }] },
      ip: { limits: [{ name: 'ip-per-minute', key_by: 'ip', algorithm: 'fixed_window', limit: 100, window: 'minute' }] },
      'orders.in-flight.user': {
        failure_mode: 'fail_closed',
        limits: [{ name: 'user-orders-in-flight', key_by: 'user', algorithm: 'concurrency', limit: 2, lease_ttl_ms: 30_000 }],
      },
      'orders.in-flight': {
        failure_mode: 'fail_closed',
        limits: [{ name: 'tenant-orders-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 2, lease_ttl_ms: 30_000 }],
      },
    },
  }),
  'in-flight test policies',
);

/** Orders whose write waits until the test opens the gate; each waiting order is counted. */
function gatedOrders() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let waiting = 0;
  const arrivals: (() => void)[] = [];
  const store = new OrderStore({ widget: 1000 }, async () => {
    waiting++;
    for (const arrived of arrivals.splice(0)) arrived();
    await gate;
  });
  return {
    store,
    open,
    /** Resolves once `n` orders wait at the gate. */
    async waitingFor(n: number) {
      while (waiting < n) await new Promise<void>((resolve) => arrivals.push(resolve));
    },
  };
}

describe.each(bothStores(redis))('orders in flight per tenant over 2 order API replicas, one quota service on the %s store', (_name, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  const clients: QuotaClient[] = [];
  const apis: RunningApi[] = [];
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store, POLICIES);
  });
  afterAll(async () => {
    await service?.stop();
  });
  afterEach(async () => {
    await Promise.all(apis.splice(0).map((a) => a.app.close()));
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await fixture.reset();
  });

  /** Two replicas: each its own quota client and HTTP server, sharing `orders`. */
  const replicas = async (orders: OrderStore): Promise<[RunningApi, RunningApi]> => {
    const started: RunningApi[] = [];
    for (let i = 0; i < 2; i++) {
      const quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
      clients.push(quota);
      started.push(await startOrderApi(quota, {}, orders));
    }
    apis.push(...started);
    return [started[0]!, started[1]!];
  };
  const leasesHeld = async (tenant: string) => (await service.client.getQuota({ policy: 'orders.in-flight', identity: { tenant } })).limits[0]?.leasesHeld;
  const userLeasesHeld = async (user: string) => (await service.client.getQuota({ policy: 'orders.in-flight.user', identity: { user } })).limits[0]?.leasesHeld;

  it("the tenant's cap holds across both replicas: the third order of acme is 429 on either, another tenant is not capped, and finished orders free their leases", async () => {
    const gated = gatedOrders();
    const [a, b] = await replicas(gated.store);
    const held = [post(a, ALICE), post(b, BOB)];
    await gated.waitingFor(2);
    expect(await leasesHeld('acme')).toBe(2);

    for (const replica of [a, b]) {
      const refused = await post(replica, API_KEY);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).not.toBeNull();
      expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await refused.json()).toMatchObject({
        error: 'rate_limit_exceeded',
        policy: 'orders.in-flight',
        limit: 'tenant-orders-in-flight',
      });
    }
    // Refused before the rate limits and the business logic: no stock read beyond the two held orders.
    expect(a.orders.stockReads).toBe(2);

    // globex has its own cap: carol's order passes while acme's two are held.
    const carol = post(b, CAROL);
    await gated.waitingFor(3);
    expect(await leasesHeld('globex')).toBe(1);

    gated.open();
    expect((await Promise.all([...held, carol])).map((r) => r.status)).toEqual([201, 201, 201]);
    await vi.waitFor(async () => expect(await leasesHeld('acme')).toBe(0));
    expect((await post(b, API_KEY)).status).toBe(201);
  });

  it('an order that fails (500) and an order whose client went away both release their lease', async () => {
    let fail = true;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let arrived!: () => void;
    const waiting = new Promise<void>((resolve) => (arrived = resolve));
    const orders = new OrderStore({ widget: 1000 }, async () => {
      if (fail) throw new Error('the order database is down');
      arrived();
      await gate;
    });
    const [a, b] = await replicas(orders);

    const failed = await post(a, ALICE);
    expect(failed.status).toBe(500);
    await vi.waitFor(async () => expect(await leasesHeld('acme')).toBe(0));

    fail = false;
    const abort = new AbortController();
    const gone = fetch(`${b.url}/api/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...BOB },
      body: JSON.stringify({ sku: 'widget', quantity: 1 }),
      signal: abort.signal,
    }).catch((error: unknown) => error);
    await waiting;
    expect(await leasesHeld('acme')).toBe(1);
    abort.abort();
    expect(await gone).toBeInstanceOf(Error);
    // The response ended (the socket closed): its lease is free although the order's work still waits.
    await vi.waitFor(async () => expect(await leasesHeld('acme')).toBe(0));
    open();
  });

  it("a client that goes away while its tenant's lease is being acquired gets no order, and both its leases are released once that one arrives", async () => {
    const quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
    clients.push(quota);
    // The tenant's lease (taken after the user's) is granted at once, but its answer reaches the order API only when the test says so.
    const acquire = quota.acquire;
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    let granted!: () => void;
    const acquiredInStore = new Promise<void>((resolve) => (granted = resolve));
    quota.acquire = async (...args) => {
      const lease = await acquire(...args);
      if (args[0].policy !== 'orders.in-flight') return lease;
      granted();
      await answered;
      return lease;
    };
    const api = await startOrderApi(quota, {}, new OrderStore({ widget: 1000 }));
    apis.push(api);
    let closed!: () => void;
    const socketClosed = new Promise<void>((resolve) => (closed = resolve));
    api.app.server.once('connection', (socket: Socket) => socket.once('close', () => closed()));

    const abort = new AbortController();
    const gone = fetch(`${api.url}/api/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ALICE },
      body: JSON.stringify({ sku: 'widget', quantity: 1 }),
      signal: abort.signal,
    }).catch((error: unknown) => error);
    await acquiredInStore;
    expect(await leasesHeld('acme')).toBe(1);
    expect(await userLeasesHeld('alice')).toBe(1);
    abort.abort();
    expect(await gone).toBeInstanceOf(Error);
    await socketClosed;
    // The user's lease ends with the connection.
    await vi.waitFor(async () => expect(await userLeasesHeld('alice')).toBe(0));

    answer();
    await vi.waitFor(async () => expect(await leasesHeld('acme')).toBe(0));
    // The route never ran: nothing was read or ordered for the client that left.
    expect(api.orders.stockReads).toBe(0);
    // Both places of the cap admit new orders.
    const [first, second] = await Promise.all([post(api, ALICE), post(api, BOB)]);
    expect([first.status, second.status]).toEqual([201, 201]);
  });
});
