import { ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { parseCallers } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { QuotaMetrics } from '../../src/metrics/metrics.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { shippedPolicies } from '../support/quota-service.js';

/**
 * QuotaService.Settle over a real gRPC server on a real Redis: the answer,
 * the status codes of every refusal, the caller's policy check, the store
 * down, and the reservation metrics.
 */
const TOKEN = 'order-api-token-5e1d2c3b4a596877';
const CALLERS = `
callers:
  order-api:
    token: ${TOKEN}
    policies: [orders, orders.create]
`;
const auth = { metadata: Metadata({ authorization: `Bearer ${TOKEN}` }) };
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'OK',
    (error: unknown) => (error instanceof ClientError ? `${Status[error.code]}: ${error.details}` : `not a gRPC error: ${String(error)}`),
  );

let redis: RedisServer;
let server: QuotaServer;
let channel: Channel;
const metrics = new QuotaMetrics();
beforeAll(async () => {
  redis = await startRedisServer();
  const store = new RedisStore(redis.client());
  const engine = new QuotaEngine(await shippedPolicies(), store, {
    onReserve: (policy, ttlMs) => metrics.reserved(policy, ttlMs),
    onSettle: (policy, event, reservation) => metrics.settled(policy, event, reservation),
  });
  server = await startQuotaServer({ engine, address: '127.0.0.1:0', logger: createLogger('silent'), callers: parseCallers(CALLERS) });
  await store.ready();
  server.setServing(true);
  channel = createChannel(`127.0.0.1:${server.port}`);
});
afterAll(async () => {
  channel?.close();
  await server?.shutdown(1_000);
  await redis?.stop();
});

describe('Settle over gRPC', () => {
  const client = () => createClient(QuotaServiceDefinition, channel, { '*': auth });
  const settle = (requestId: string, actualCost: number, policy = 'orders', user = 's1') =>
    client().settle({ policy, identity: { user, tenant: 'acme' }, requestId, actualCost });

  it('settles a reservation: the difference given back, once; already_settled afterwards', async () => {
    const reserved = await client().allow({ policy: 'orders.create', identity: { user: 's1', tenant: 'acme' }, cost: 6, requestId: 'po-1' });
    expect(reserved.limits.map((l) => l.remaining)).toEqual([4, 114, 1994]);
    const settled = await settle('po-1', 1, 'orders.create');
    expect(settled).toMatchObject({ estimate: 6, actualCost: 1, delta: -5, alreadySettled: false });
    expect(settled.limits.map((l) => [l.name, Math.floor(l.remaining)])).toEqual([
      ['orders', 9],
      ['user-per-minute', 119],
      ['tenant-per-minute', 1999],
    ]);
    expect(await settle('po-1', 6, 'orders.create')).toMatchObject({ actualCost: 1, delta: -5, alreadySettled: true });
    // A retry of the Allow still answers the reservation's decision and spends nothing.
    expect((await client().allow({ policy: 'orders.create', identity: { user: 's1', tenant: 'acme' }, cost: 6, requestId: 'po-1' })).limits).toEqual(
      reserved.limits,
    );
  });

  it('refusals: each with its code and the field named; none of them writes', async () => {
    await client().allow({ policy: 'orders', identity: { user: 's2' }, cost: 10, requestId: 'all' });
    await client().allow({ policy: 'orders', identity: { user: 's2' }, cost: 5, requestId: 'denied' });
    const keys = async () => (await redis.client().keys('*')).sort();
    const bucket = async () => redis.client().hget('rl:v1:orders:user:{s2}', 'tokens');
    const [keysBefore, bucketBefore] = [await keys(), await bucket()];
    expect(await codeOf(settle('never', 1, 'orders', 's2'))).toMatch(/^NOT_FOUND: request_id: no reservation/);
    expect(await codeOf(settle('all', 1, 'orders', 'someone-else'))).toMatch(/^NOT_FOUND: request_id/);
    expect(await codeOf(settle('denied', 1, 'orders', 's2'))).toMatch(/^FAILED_PRECONDITION: request_id: its Allow was denied/);
    expect(await codeOf(settle('all', -1, 'orders', 's2'))).toMatch(/^INVALID_ARGUMENT: actual_cost: must not be negative/);
    expect(await codeOf(settle('all', Number.NaN, 'orders', 's2'))).toMatch(/^INVALID_ARGUMENT: actual_cost: must be a finite number/);
    expect(await codeOf(settle('all', Number.POSITIVE_INFINITY, 'orders', 's2'))).toMatch(/^INVALID_ARGUMENT: actual_cost/);
    expect(await codeOf(settle('', 1, 'orders', 's2'))).toMatch(/^INVALID_ARGUMENT: request_id/);
    expect(await codeOf(client().settle({ policy: 'orders', identity: {}, requestId: 'all', actualCost: 1 }))).toMatch(/^INVALID_ARGUMENT: identity.user/);
    expect(await codeOf(settle('all', 1, 'user'))).toMatch(/^PERMISSION_DENIED/);
    expect(
      await codeOf(createClient(QuotaServiceDefinition, channel).settle({ policy: 'orders', identity: { user: 's2' }, requestId: 'all', actualCost: 1 })),
    ).toMatch(/^UNAUTHENTICATED/);
    expect([await keys(), await bucket()]).toEqual([keysBefore, bucketBefore]);
    // The owner still settles it.
    expect((await settle('all', 1, 'orders', 's2')).alreadySettled).toBe(false);
  });

  it('counts reservations, settlements and the units they moved', async () => {
    const value = async (name: string, labels: Record<string, string>) => {
      const metric = (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
      return metric?.value ?? 0;
    };
    const before = await value('quota_reservations_total', { policy: 'orders' });
    const settledBefore = await value('quota_settlements_total', { policy: 'orders', result: 'settled' });
    const chargedBefore = await value('quota_settled_units_total', { policy: 'orders', direction: 'charged' });
    await client().allow({ policy: 'orders', identity: { user: 's3' }, cost: 2, requestId: 'm-1' });
    await client().allow({ policy: 'orders', identity: { user: 's3' }, cost: 2, requestId: 'm-1' });
    await settle('m-1', 5, 'orders', 's3');
    await settle('m-1', 5, 'orders', 's3');
    expect(await value('quota_reservations_total', { policy: 'orders' })).toBe(before + 1);
    expect(await value('quota_settlements_total', { policy: 'orders', result: 'settled' })).toBe(settledBefore + 1);
    expect(await value('quota_settlements_total', { policy: 'orders', result: 'already_settled' })).toBeGreaterThanOrEqual(1);
    expect(await value('quota_settled_units_total', { policy: 'orders', direction: 'charged' })).toBe(chargedBefore + 3);
  });

  it('the store down: UNAVAILABLE, within the budget', async () => {
    await client().allow({ policy: 'orders', identity: { user: 's4' }, cost: 2, requestId: 'late' });
    await redis.stop();
    const started = Date.now();
    expect(await codeOf(settle('late', 1, 'orders', 's4'))).toMatch(/^UNAVAILABLE/);
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});
