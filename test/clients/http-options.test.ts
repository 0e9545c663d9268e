import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { LocalLimiter, parsePolicies } from '@quota-service/core';
import { expressRateLimit } from '@quota-service/http/express';
import { fastifyRateLimit } from '@quota-service/http/fastify';
import type { Framework } from '../support/http-apps.js';
import { startOptionApp, type OptionApp } from '../support/http-option-apps.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

// The adapters' options, each against a real quota service and a real listening server.
const redis = useRedisServer();
const POLICIES = parsePolicies(`
policies:
  orders:
    limits: [{ name: orders, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 2 }]
`);
const frameworks: Framework[] = ['express', 'fastify'];
const as = (user: string, extra: Record<string, string> = {}) => ({ headers: { authorization: `Bearer ${user}`, ...extra } });

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
  /** The user's remaining `orders` quota as the service counts it (GetQuota spends nothing). */
  const remaining = async (user: string) => (await service.client.getQuota({ policy: 'orders', identity: { user } })).limits[0]!.remaining;

  describe.each(frameworks)('%s', (framework) => {
    let app: OptionApp;
    beforeAll(async () => {
      app = await startOptionApp(framework, client, [
        { path: '/skip', status: 200, skipHeader: 'x-internal' },
        { path: '/message-string', status: 200, cost: 10, message: 'Slow down, please.' },
        { path: '/message-object', status: 200, cost: 10, message: { error: 'slow_down', code: 42 } },
        { path: '/message-function', status: 200, cost: 10, message: (decision) => ({ deniedBy: decision.deniedBy, waitMs: decision.retryAfterMs }) },
        { path: '/handler', status: 200, cost: 10, handler: true },
        { path: '/failing', status: 500, skipFailedRequests: true },
        { path: '/fine-skip-failed', status: 200, skipFailedRequests: true },
        { path: '/never', status: 'never', skipFailedRequests: true },
        { path: '/fine', status: 200, skipSuccessfulRequests: true },
        { path: '/failing-skip-successful', status: 500, skipSuccessfulRequests: true },
        { path: '/legacy', status: 200, legacyHeaders: true },
        { path: '/standard', status: 200 },
      ]);
    });
    afterAll(async () => {
      await app?.close();
    });
    afterEach(async () => {
      await fixture.reset();
    });

    it('skip: a skipped request makes no quota call and carries no RateLimit headers; the others are counted', async () => {
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${app.url}/skip`, as('sam', { 'x-internal': 'yes' }));
        expect(response.status).toBe(200);
        expect(response.headers.get('ratelimit')).toBeNull();
      }
      expect(await remaining('sam')).toBe(10);
      const counted = await fetch(`${app.url}/skip`, as('sam'));
      expect(counted.headers.get('ratelimit')).toBe('"orders";r=9;t=1');
      expect(await remaining('sam')).toBe(9);
      expect(app.handled()).toBeGreaterThanOrEqual(4);
    });

    it('message as a string replaces the message of the JSON 429 body; the other fields and headers stay', async () => {
      expect((await fetch(`${app.url}/message-string`, as('mia'))).status).toBe(200);
      const denied = await fetch(`${app.url}/message-string`, as('mia'));
      expect(denied.status).toBe(429);
      expect(denied.headers.get('content-type')).toMatch(/^application\/json/);
      expect(denied.headers.get('retry-after')).toBe('5');
      expect(await denied.json()).toEqual({
        error: 'rate_limit_exceeded',
        message: 'Slow down, please.',
        policy: 'orders',
        retry_after_ms: 5000,
        limit: 'orders',
      });
    });

    it('message as an object is the whole 429 body; as a function it is made from the decision', async () => {
      await fetch(`${app.url}/message-object`, as('max'));
      const object = await fetch(`${app.url}/message-object`, as('max'));
      expect(object.status).toBe(429);
      expect(object.headers.get('retry-after')).toBe('5');
      expect(await object.json()).toEqual({ error: 'slow_down', code: 42 });
      const made = await fetch(`${app.url}/message-function`, as('max'));
      expect(made.status).toBe(429);
      expect(await made.json()).toEqual({ deniedBy: 'orders', waitMs: 5000 });
    });

    it('handler answers the 429 instead of the default writer, with the decision and the headers already set; the route does not run', async () => {
      await fetch(`${app.url}/handler`, as('hal'));
      const handledBefore = app.handled();
      const denied = await fetch(`${app.url}/handler`, as('hal'));
      expect(denied.status).toBe(429);
      expect(denied.headers.get('x-handled')).toBe('yes');
      expect(denied.headers.get('retry-after')).toBe('5');
      expect(denied.headers.get('ratelimit')).toBe('"orders";r=0;t=5');
      expect(await denied.json()).toEqual({ handled: 'orders' });
      expect(app.handled()).toBe(handledBefore);
    });

    it('skipFailedRequests: a 500 gives its unit back (one Settle at 0); a 200 keeps it spent', async () => {
      for (let i = 0; i < 3; i++) expect((await fetch(`${app.url}/failing`, as('fay'))).status).toBe(500);
      const refunds = await app.refunds(3);
      for (const refund of refunds) expect(refund.settlement).toMatchObject({ status: 'settled', estimate: 1, actualCost: 0, delta: -1 });
      expect(await remaining('fay')).toBe(10);
      expect((await fetch(`${app.url}/fine-skip-failed`, as('fay'))).status).toBe(200);
      expect(await remaining('fay')).toBe(9);
    });

    it('skipFailedRequests: a response the client gave up on before it was sent counts as failed: its unit comes back', async () => {
      const abort = new AbortController();
      const pending = fetch(`${app.url}/never`, { ...as('abe'), signal: abort.signal }).catch((error: unknown) => error);
      await app.handledAtLeast(app.handled() + 1);
      expect(await remaining('abe')).toBe(9);
      abort.abort();
      expect(await pending).toBeInstanceOf(Error);
      const [refund] = await app.refunds(1);
      expect(refund!.settlement).toMatchObject({ status: 'settled', delta: -1 });
      expect(await remaining('abe')).toBe(10);
    });

    it('skipSuccessfulRequests: a 200 gives its unit back; a 500 keeps it spent', async () => {
      expect((await fetch(`${app.url}/failing-skip-successful`, as('sue'))).status).toBe(500);
      for (let i = 0; i < 3; i++) expect((await fetch(`${app.url}/fine`, as('sue'))).status).toBe(200);
      const refunds = await app.refunds(3);
      for (const refund of refunds) expect(refund.settlement).toMatchObject({ status: 'settled', delta: -1 });
      expect(await remaining('sue')).toBe(9);
    });

    it('legacyHeaders: X-RateLimit-Limit, -Remaining and -Reset (unix seconds) beside the standard headers; off by default', async () => {
      const before = Math.floor(Date.now() / 1000);
      const response = await fetch(`${app.url}/legacy`, as('leo'));
      const after = Math.ceil((Date.now() + 500) / 1000);
      expect(response.headers.get('x-ratelimit-limit')).toBe('10');
      expect(response.headers.get('x-ratelimit-remaining')).toBe('9');
      const reset = Number(response.headers.get('x-ratelimit-reset'));
      expect(reset).toBeGreaterThanOrEqual(before);
      expect(reset).toBeLessThanOrEqual(after);
      expect(response.headers.get('ratelimit')).toBe('"orders";r=9;t=1');

      const standard = await fetch(`${app.url}/standard`, as('leo'));
      expect(standard.headers.get('ratelimit')).toBe('"orders";r=8;t=1');
      for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) expect(standard.headers.get(name)).toBeNull();
    });
  });
});

describe('refunds need a client that can reserve', () => {
  const decider = (() => {
    const limiter = new LocalLimiter(POLICIES);
    return { allow: async (params: Parameters<LocalLimiter['allow']>[0]) => limiter.allow(params) };
  })();
  const options = { client: decider, policy: 'orders', identify: () => ({ user: 'x' }) };
  it.each([
    ['express', () => expressRateLimit({ ...options, skipFailedRequests: true })],
    ['fastify', () => fastifyRateLimit({ ...options, skipSuccessfulRequests: true })],
  ])('%s: a client without reserve() is refused when the adapter is made, not on the first request', (_name, make) => {
    expect(make).toThrow(/need a client with reserve\(\)/);
  });
});
