import { Status } from 'nice-grpc';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, QuotaInvalidArgumentError, QuotaPolicyNotFoundError, type QuotaClient, type QuotaClientOptions } from '@quota-service/client';
import { startTestService, type TestService } from '../support/quota-service.js';
import { rpcCounter } from '../support/rpc-counter.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();

describe.each(bothStores(redis))('quota client against the service on the %s store', (_name, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  const clients: QuotaClient[] = [];
  const counter = rpcCounter();
  // Generous: the machine is shared; these tests are about answers, not speed.
  const connect = (options: Partial<QuotaClientOptions> = {}) => {
    const client = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000, middleware: counter.middleware, ...options });
    clients.push(client);
    return client;
  };
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await service?.stop();
  });
  afterEach(async () => {
    counter.reset();
    await fixture.reset();
  });

  it.each([
    ['unary', { batch: false }],
    ['batching on a stream', {}],
    ['batching in AllowBatch calls', { stream: false }],
  ] as const)('%s: 10 orders allowed, the 11th denied with retry and limit status, source "store"', async (_name, mode: Partial<QuotaClientOptions>) => {
    const client = connect(mode);
    for (let i = 0; i < 10; i++) {
      expect(await client.allow({ policy: 'orders', identity: { user: 'u1' } })).toMatchObject({ allowed: true, source: 'store', retryAfterMs: 0 });
    }
    expect(await client.allow({ policy: 'orders', identity: { user: 'u1' } })).toEqual({
      allowed: false,
      retryAfterMs: 500,
      deniedBy: 'orders',
      limits: [{ name: 'orders', algorithm: 'token_bucket', limit: 10, remaining: 0, resetAfterMs: 5_000, applied: 1, plan: '', leasesHeld: 0 }],
      delayMs: 0,
      source: 'store',
    });
    fixture.clock.advance(500);
    expect(await client.allow({ policy: 'orders', identity: { user: 'u1' } })).toMatchObject({ allowed: true });
  });

  it.each([
    ['two AllowStream messages', true],
    ['two AllowBatch RPCs', false],
  ] as const)(
    "batching: 50 concurrent calls make %s (a turn's many calls go as two batches), and each caller gets its own decision in call order",
    async (_name, stream) => {
      const client = connect({ batch: { maxDelayMs: 0, maxSize: 100 }, stream });
      // 5 users x 10 calls, interleaved; user i spends cost i+1 on its first call.
      const calls = Array.from({ length: 50 }, (_, n) => ({ user: `b${n % 5}`, cost: n < 5 ? n + 1 : 1 }));
      const decisions = await Promise.all(calls.map((c) => client.allow({ policy: 'orders', identity: { user: c.user }, cost: c.cost })));
      expect(counter.count('AllowStream')).toBe(stream ? 1 : 0);
      expect(counter.messages('AllowStream')).toBe(stream ? 2 : 0);
      expect(counter.count('AllowBatch')).toBe(stream ? 0 : 2);
      expect(counter.count('Allow')).toBe(0);
      for (let u = 0; u < 5; u++) {
        const mine = decisions.filter((_, n) => calls[n]!.user === `b${u}`);
        // Bucket of 10: the first call spends u+1, then 1 each, in call order, until it runs dry.
        const expected = Array.from({ length: 10 }, (_, k) => ({ allowed: k <= 9 - u, remaining: Math.max(0, 9 - u - k) }));
        expect(mine.map((d) => ({ allowed: d.allowed, remaining: d.limits[0]!.remaining }))).toEqual(expected);
      }
    },
  );

  it('listPolicies: the names of the policies the service enforces; rejects when no service answers', async () => {
    const names = await connect().listPolicies();
    expect(names).toContain('orders');
    expect(names).toContain('orders.create');
    const closed = createQuotaClient({ address: '127.0.0.1:1', deadlineMs: 200 });
    clients.push(closed);
    await expect(closed.listPolicies()).rejects.toThrow();
  });

  it('batching on a stream: maxSize splits the calls into messages of one AllowStream, a lone call included', async () => {
    const client = connect({ batch: { maxDelayMs: 0, maxSize: 8 } });
    await Promise.all(Array.from({ length: 20 }, (_, n) => client.allow({ policy: 'user', identity: { user: `s${n}` } })));
    expect(counter.messages('AllowStream')).toBe(3); // 8 + 8 + 4
    await client.allow({ policy: 'user', identity: { user: 'alone' } });
    expect(counter.messages('AllowStream')).toBe(4);
    expect([counter.count('AllowStream'), counter.count('AllowBatch'), counter.count('Allow')]).toEqual([1, 0, 0]);
  });

  it('batching in AllowBatch calls: maxSize splits the calls; a lone call goes as a plain Allow', async () => {
    const client = connect({ batch: { maxDelayMs: 0, maxSize: 8 }, stream: false });
    await Promise.all(Array.from({ length: 20 }, (_, n) => client.allow({ policy: 'user', identity: { user: `s${n}` } })));
    expect(counter.count('AllowBatch')).toBe(3); // 8 + 8 + 4
    await client.allow({ policy: 'user', identity: { user: 'alone' } });
    expect(counter.count('Allow')).toBe(1);
    expect(counter.count('AllowStream')).toBe(0);
  });

  it('a string with a lone surrogate (no UTF-8 form) is refused before it is sent: it cannot reach the service as another value', async () => {
    const client = connect({ onUnavailable: 'fail_open' });
    const refusals = await Promise.allSettled([
      client.allow({ policy: 'orders', identity: { user: 'a\uD800' } }),
      client.allow({ policy: 'orders', identity: { 'us\uDC00er': 'a' } }),
      client.allow({ policy: 'orders\uD800', identity: { user: 'a' } }),
      client.allow({ policy: 'orders', identity: { user: 'a' }, requestId: 'r\uDFFF' }),
    ]);
    expect(refusals.map((r) => (r.status === 'rejected' ? (r.reason as QuotaInvalidArgumentError).details : 'sent'))).toEqual([
      'identity.user: not valid UTF-8',
      'identity: a part name is not valid UTF-8',
      'policy: not valid UTF-8',
      'request_id: not valid UTF-8',
    ]);
    expect(refusals.every((r) => r.status === 'rejected' && r.reason instanceof QuotaInvalidArgumentError)).toBe(true);
    // Nothing was spent: "a\uFFFD", what the lone surrogate would have become, has its whole bucket.
    expect((await client.allow({ policy: 'orders', identity: { user: 'a\uFFFD' } })).limits[0]?.remaining).toBe(9);
  });

  it.each([
    ['unary', { batch: false }, 'Allow', 5],
    ['batching on a stream', {}, 'AllowStream', 1],
    ['batching in AllowBatch calls', { stream: false }, 'AllowBatch', 2],
  ] as const)(
    '%s: caller bugs reject with a typed error naming the field, never a fallback decision',
    async (_name, mode: Partial<QuotaClientOptions>, rpc, rpcs) => {
      const client = connect({ ...mode, onUnavailable: 'fail_open' });
      const results = await Promise.allSettled([
        client.allow({ policy: 'orders', identity: { user: 'ok' } }),
        client.allow({ policy: 'orders', identity: { user: 'ok' }, cost: -1 }),
        client.allow({ policy: 'nope', identity: { user: 'ok' } }),
        client.allow({ policy: 'orders', identity: { tenant: 'acme' } }),
        client.allow({ policy: 'orders', identity: { user: 'ok' } }),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'fulfilled']);
      const reasons = results.map((r) => (r.status === 'rejected' ? (r.reason as Error) : undefined));
      expect(reasons[1]).toBeInstanceOf(QuotaInvalidArgumentError);
      expect(reasons[1]).toMatchObject({ code: Status.INVALID_ARGUMENT, details: 'cost: must not be negative, got -1' });
      expect(reasons[2]).toBeInstanceOf(QuotaPolicyNotFoundError);
      expect(reasons[2]).toMatchObject({ code: Status.NOT_FOUND, details: 'policy: no policy named "nope"' });
      expect(reasons[3]).toMatchObject({ code: Status.INVALID_ARGUMENT, details: 'identity.user: required by limit "orders" of policy "orders"' });
      const fulfilled = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      expect(fulfilled.map((d) => [d.source, d.limits[0]?.remaining])).toEqual([
        ['store', 9],
        ['store', 8],
      ]);
      expect(counter.count(rpc)).toBe(rpcs);
    },
  );
});
