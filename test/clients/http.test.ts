import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { retryAfterSeconds } from '@quota-service/http';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { LocalLimiter, parsePolicies } from '@quota-service/core';
import { closedPort } from '../support/closed-port.js';
import { startHttpApp, type Framework, type HttpApp } from '../support/http-apps.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();
// The shipped orders bucket (10, 2/s) and a small IP window so the tests stay short.
const POLICIES = parsePolicies(`
policies:
  orders:
    limits: [{ name: orders, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 2 }]
  ip:
    limits: [{ name: ip-per-minute, key_by: ip, algorithm: fixed_window, limit: 3, window: minute }]
`);
const frameworks: Framework[] = ['express', 'fastify'];
const INVALID_USER = { error: 'invalid_request', message: 'identity.user: not accepted by the rate limiter' };
const bearer = (who: string) => ({ authorization: `Bearer ${who}` });

it('Retry-After is max(1, ceil(retry_ms / 1000)) whole seconds', () => {
  expect([0, 1, 999, 1000, 1001, 4200].map(retryAfterSeconds)).toEqual([1, 1, 1, 1, 2, 5]);
});

describe.each(bothStores(redis))('on the %s store', (_store, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  let client: QuotaClient;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store, POLICIES);
    client = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await client?.close();
    await service?.stop();
  });

  describe.each(frameworks)('%s', (framework) => {
    let app: HttpApp;
    let proxied: HttpApp;
    beforeAll(async () => {
      app = await startHttpApp(framework, client);
      proxied = await startHttpApp(framework, client, ['loopback']);
    });
    afterAll(async () => {
      await app?.close();
      await proxied?.close();
    });
    afterEach(async () => {
      await fixture.reset();
    });

    it('10 quick orders pass with RateLimit headers; the 11th gets the 429 contract and the handler does not run; after Retry-After the next passes', async () => {
      for (let i = 0; i < 10; i++) {
        const response = await fetch(`${app.url}/orders`, { headers: bearer('alice@acme') });
        expect(response.status, `request ${i + 1}`).toBe(200);
        expect(response.headers.get('ratelimit-policy')).toBe('"orders";q=10');
        expect(response.headers.get('ratelimit')).toBe(`"orders";r=${9 - i};t=${Math.ceil(((i + 1) * 500) / 1000)}`);
      }
      const handledBefore = app.handled();
      const denied = await fetch(`${app.url}/orders`, { headers: bearer('alice@acme') });
      expect(denied.status).toBe(429);
      expect(denied.headers.get('content-type')).toMatch(/^application\/json/);
      expect(denied.headers.get('retry-after')).toBe('1');
      expect(denied.headers.get('ratelimit')).toBe('"orders";r=0;t=1');
      expect(denied.headers.get('ratelimit-policy')).toBe('"orders";q=10');
      expect(await denied.json()).toEqual({
        error: 'rate_limit_exceeded',
        message: 'Too many requests: limit "orders" of policy "orders" is used up; try again in 1 s.',
        policy: 'orders',
        retry_after_ms: 500,
        limit: 'orders',
      });
      expect(app.handled()).toBe(handledBefore);

      // Another user has a bucket of their own.
      expect((await fetch(`${app.url}/orders`, { headers: bearer('bob@acme') })).status).toBe(200);

      fixture.clock.advance(Number(denied.headers.get('retry-after')) * 1000);
      expect((await fetch(`${app.url}/orders`, { headers: bearer('alice@acme') })).status).toBe(200);
    });

    it('X-Forwarded-For from an untrusted peer is ignored: the socket address is keyed', async () => {
      for (const forwarded of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
        const response = await fetch(`${app.url}/ip`, { headers: { 'x-forwarded-for': forwarded } });
        expect(await response.json()).toEqual({ ip: '127.0.0.1' });
      }
      const fourth = await fetch(`${app.url}/ip`, { headers: { 'x-forwarded-for': '203.0.113.4' } });
      expect(fourth.status).toBe(429);
      expect(await fourth.json()).toMatchObject({ error: 'rate_limit_exceeded', policy: 'ip', limit: 'ip-per-minute' });
    });

    it('X-Forwarded-For through a trusted proxy keys the IP limit by the forwarded client', async () => {
      const from = (ip: string) => fetch(`${proxied.url}/ip`, { headers: { 'x-forwarded-for': ip } });
      for (let i = 0; i < 3; i++) expect(await (await from('198.51.100.7')).json()).toEqual({ ip: '198.51.100.7' });
      expect((await from('198.51.100.7')).status).toBe(429);
      // The next hop is a client the trusted proxy did not vouch for: it does not move the key.
      expect(await (await from('198.51.100.7, 198.51.100.8')).json()).toEqual({ ip: '198.51.100.8' });
      expect((await from('198.51.100.9')).status).toBe(200);
    });

    it("an identity the quota service refuses: 400 invalid_request naming the field, never the service's message; the handler does not run", async () => {
      const handledBefore = app.handled();
      const response = await fetch(`${app.url}/bad-identity`);
      expect(response.status).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await response.json()).toEqual(INVALID_USER);
      expect(app.handled()).toBe(handledBefore);
    });

    it("an unknown policy is the app's bug: a 500 from the framework, not a 429 and not a pass", async () => {
      const handledBefore = app.handled();
      const response = await fetch(`${app.url}/bad-policy`);
      expect(response.status).toBe(500);
      expect(app.handled()).toBe(handledBefore);
    });
  });
});

describe.each(frameworks)('%s with the quota service unreachable', (framework) => {
  const apps: HttpApp[] = [];
  const clients: QuotaClient[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(clients.map((c) => c.close()));
  });
  const appWith = async (onUnavailable: 'fail_open' | 'fail_closed') => {
    const client = createQuotaClient({ address: `127.0.0.1:${await closedPort()}`, deadlineMs: 5_000, onUnavailable });
    clients.push(client);
    const app = await startHttpApp(framework, client);
    apps.push(app);
    return app;
  };

  it('fail_closed: 503 rate_limiter_unavailable with Retry-After, never a 500; the handler does not run', async () => {
    const app = await appWith('fail_closed');
    const response = await fetch(`${app.url}/orders`, { headers: bearer('carol@acme') });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toMatchObject({ error: 'rate_limiter_unavailable', policy: 'orders', retry_after_ms: 1000 });
    expect(app.handled()).toBe(0);
  });

  it('fail_open: the request proceeds', async () => {
    const app = await appWith('fail_open');
    const response = await fetch(`${app.url}/orders`, { headers: bearer('carol@acme') });
    expect(response.status).toBe(200);
    expect(response.headers.get('ratelimit')).toBeNull();
    expect(app.handled()).toBe(1);
  });
});

describe.each(frameworks)('%s with a decider of its own (a LocalLimiter)', (framework) => {
  let app: HttpApp;
  beforeAll(async () => {
    const limiter = new LocalLimiter(POLICIES);
    app = await startHttpApp(framework, { allow: async (params) => limiter.allow(params) });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('its InvalidArgumentError is the same 400 invalid_request; the handler does not run', async () => {
    const response = await fetch(`${app.url}/bad-identity`);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(INVALID_USER);
    expect(app.handled()).toBe(0);
    expect((await fetch(`${app.url}/orders`, { headers: bearer('dave@acme') })).status).toBe(200);
  });
});
