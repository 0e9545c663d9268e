import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '@quota-service/core';
import { DecisionSource } from '@quota-service/contract';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { T0 } from '../support/store-fixtures.js';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

describe('Allow over gRPC on Redis (Redis clock)', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService(new RedisStore(redis.client()));
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('10 quick orders calls for one user are allowed, the 11th is denied by the orders bucket', async () => {
    const call = () => service.client.allow({ policy: 'orders', identity: { user: 'e2e-1' } });
    for (let i = 0; i < 10; i++) {
      const response = await call();
      expect(response.allowed, `call ${i + 1}`).toBe(true);
      expect(response.retryAfterMs).toBe(0);
      expect(response.deniedBy).toBe('');
    }
    const denied = await call();
    expect(denied.allowed).toBe(false);
    expect(denied.deniedBy).toBe('orders');
    expect(denied.source).toBe(DecisionSource.DECISION_SOURCE_STORE);
    // Fewer than one token left at 2 tokens/s: the wait for the next is at most 500 ms.
    expect(denied.retryAfterMs).toBeGreaterThanOrEqual(1);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(500);
    expect(denied.limits).toHaveLength(1);
    const [status] = denied.limits;
    expect(status).toMatchObject({ name: 'orders', algorithm: 'token_bucket', limit: 10 });
    expect(status!.remaining).toBeGreaterThanOrEqual(0);
    expect(status!.remaining).toBeLessThan(1);
    expect(status!.resetAfterMs).toBeGreaterThan(4_500);
    expect(status!.resetAfterMs).toBeLessThanOrEqual(5_000);
  });

  it('a denial is a normal response carrying the limit status, and state lives under rl:v1:<limit>:<key_by>:{<identity>}', async () => {
    const response = await service.client.allow({ policy: 'user', identity: { user: 'e2e-2' }, cost: 120 });
    expect(response).toMatchObject({ allowed: true, limits: [{ name: 'user-per-minute', algorithm: 'fixed_window', limit: 120, remaining: 0 }] });
    const denied = await service.client.allow({ policy: 'user', identity: { user: 'e2e-2' } });
    expect(denied.allowed).toBe(false);
    expect(denied.deniedBy).toBe('user-per-minute');
    expect(denied.retryAfterMs).toBeGreaterThanOrEqual(1);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(60_000);
    const client = redis.client();
    expect(await client.exists('rl:v1:orders:user:{e2e-1}')).toBe(1);
    expect(await client.keys('rl:v1:user-per-minute:user:{e2e-2}:minute')).toHaveLength(1);
  });

  it('ListPolicies describes the loaded policies', async () => {
    const { policies } = await service.client.listPolicies({});
    expect(policies.map((p) => p.name)).toEqual(['orders', 'orders.create', 'orders.in-flight.user', 'orders.in-flight', 'user', 'tenant', 'ip']);
    expect(policies[0]!.limits).toEqual([
      { name: 'orders', keyBy: 'user', tokenBucket: { capacity: 10, refillPerSecond: 2 }, fixedWindow: undefined, planBy: '', plans: [] },
    ]);
    expect(policies[1]!.limits.map((l) => l.name)).toEqual(['orders', 'user-per-minute', 'tenant-per-minute']);
    expect(policies[6]!.limits[0]).toMatchObject({ name: 'ip-per-minute', keyBy: 'ip', fixedWindow: { limit: 30, window: 'minute' } });
    expect(policies[0]!.failureMode).toEqual({ mode: 'local', localShare: 0.5 });
    expect(policies[2]!.failureMode).toEqual({ mode: 'fail_closed', localShare: 0 });
    expect(policies[3]!.failureMode).toEqual({ mode: 'fail_closed', localShare: 0 });
    expect(policies[4]!.failureMode).toEqual({ mode: 'fail_open', localShare: 0 });
  });
});

describe('atomic decisions over gRPC: simultaneous calls on several instances never spend a token twice', () => {
  it('one token left, 50 simultaneous calls spread over 3 service instances: exactly one allowed', async () => {
    // Frozen virtual time: no refill can happen between the calls, so only atomicity decides.
    const clock = new VirtualClock(T0);
    const replicas = await Promise.all([0, 1, 2].map(() => startTestService(new RedisStore(redis.client(), { clock: clock }))));
    try {
      const first = replicas[0]!.client;
      expect((await first.allow({ policy: 'orders', identity: { user: 'race' }, cost: 9 })).allowed).toBe(true);
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) => replicas[i % 3]!.client.allow({ policy: 'orders', identity: { user: 'race' } })),
      );
      expect(responses.filter((r) => r.allowed)).toHaveLength(1);
      expect(responses.filter((r) => !r.allowed).every((r) => r.retryAfterMs === 500 && r.deniedBy === 'orders')).toBe(true);
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
    }
  });
});
