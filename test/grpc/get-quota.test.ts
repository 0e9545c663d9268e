import { ClientError, Status } from 'nice-grpc';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies, VirtualClock } from '@quota-service/core';
import { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { QuotaStore } from '../../src/store/store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { T0 } from '../support/store-fixtures.js';

/** One policy per algorithm, as a policy file would list them. */
const policies = parsePolicies(
  stringify({
    policies: {
      bucket: { limits: [{ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 }] },
      window: { limits: [{ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 100, window: 'minute' }] },
      log: { limits: [{ name: 'log', key_by: 'user', algorithm: 'sliding_window_log', limit: 20, window: 'minute' }] },
      counter: { limits: [{ name: 'counter', key_by: 'user', algorithm: 'sliding_window_counter', limit: 50, window: 'hour' }] },
      police: { limits: [{ name: 'police', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, leak_per_second: 1 }] },
      shape: { limits: [{ name: 'shape', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, leak_per_second: 1, mode: 'shaping' }] },
      gcra: { limits: [{ name: 'gcra', key_by: 'user', algorithm: 'gcra', capacity: 8, refill_per_second: 4 }] },
    },
  }),
);
const names = [...policies.keys()];
const full: Record<string, number> = { bucket: 10, window: 100, log: 20, counter: 50, police: 5, shape: 5, gcra: 8 };

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

/** Every key with its type, serialized value and whether it has an expiry. */
async function snapshot(): Promise<Record<string, string>> {
  const client = redis.client();
  const out: Record<string, string> = {};
  for (const key of (await client.keys('*')).sort()) {
    const dump = await client.dumpBuffer(key);
    out[key] = `${await client.type(key)} ${dump?.toString('hex')} ttl:${(await client.pttl(key)) > 0}`;
  }
  return out;
}

describe('GetQuota on Redis (virtual clock)', () => {
  const clock = new VirtualClock(T0);
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService(new RedisStore(redis.client(), { clock: clock }), policies);
  });
  afterAll(async () => {
    await service?.stop();
  });
  beforeEach(async () => {
    await redis.client().flushdb();
  });

  it.each(names)('%s: an unknown identity reports a full quota and no key is created', async (policy) => {
    const { limits } = await service.client.getQuota({ policy, identity: { user: 'new' } });
    expect(limits).toEqual([
      { name: policy, algorithm: expect.any(String), limit: full[policy], remaining: full[policy], resetAfterMs: 0, applied: 1, plan: '', leasesHeld: 0 },
    ]);
    expect(await redis.client().dbsize()).toBe(0);
  });

  it.each(names)('%s: reports what Allow left, and changes nothing (keys, values, expiries)', async (policy) => {
    let last;
    for (let i = 0; i < 3; i++) last = await service.client.allow({ policy, identity: { user: '42' }, cost: 1 });
    clock.advance(100);
    const before = await snapshot();
    const { limits } = await service.client.getQuota({ policy, identity: { user: '42' } });
    const again = await service.client.getQuota({ policy, identity: { user: '42' } });
    expect(await snapshot()).toEqual(before);
    expect(again.limits).toEqual(limits);
    const status = limits[0]!;
    expect(status.remaining).toBeGreaterThanOrEqual(last!.limits[0]!.remaining);
    expect(status.remaining).toBeLessThan(full[policy]!);
    expect(status.resetAfterMs).toBeGreaterThan(0);
  });

  it('shaping over gRPC: delay_ms grows with the queue', async () => {
    const delays = [];
    for (let i = 0; i < 3; i++) delays.push((await service.client.allow({ policy: 'shape', identity: { user: 'q' } })).delayMs);
    expect(delays).toEqual([0, 1_000, 2_000]);
  });

  it('ListPolicies shows every algorithm as its oneof member', async () => {
    const { policies: listed } = await service.client.listPolicies({});
    const byName = Object.fromEntries(listed.map((p) => [p.name, p.limits[0]]));
    expect(byName.log).toMatchObject({ slidingWindowLog: { limit: 20, window: 'minute' } });
    expect(byName.counter).toMatchObject({ slidingWindowCounter: { limit: 50, window: 'hour' } });
    expect(byName.police).toMatchObject({ leakyBucket: { capacity: 5, leakPerSecond: 1, mode: 'policing' } });
    expect(byName.shape).toMatchObject({ leakyBucket: { capacity: 5, leakPerSecond: 1, mode: 'shaping' } });
    expect(byName.gcra).toMatchObject({ gcra: { capacity: 8, refillPerSecond: 4 } });
  });

  it.each([
    ['empty policy', { policy: '', identity: { user: '1' } }, Status.INVALID_ARGUMENT, /^policy: must not be empty$/],
    ['unknown policy', { policy: 'nope', identity: { user: '1' } }, Status.NOT_FOUND, /^policy: no policy named "nope"$/],
    [
      'missing identity part',
      { policy: 'gcra', identity: { tenant: 'a' } },
      Status.INVALID_ARGUMENT,
      /^identity\.user: required by limit "gcra" of policy "gcra"$/,
    ],
    ['id with a newline', { policy: 'log', identity: { user: 'a\nb' } }, Status.INVALID_ARGUMENT, /^identity\.user: must not contain control characters$/],
  ])('bad input (%s): the status Allow gives, nothing written', async (_name, request, status, message) => {
    const error = await service.client.getQuota(request).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).code).toBe(status);
    expect((error as ClientError).details).toMatch(message);
    expect(await redis.client().dbsize()).toBe(0);
  });
});

describe('GetQuota on the embedded store', () => {
  it('creates no key and spends nothing', async () => {
    const clock = new VirtualClock(T0);
    const store = new MemoryStore(clock);
    const service = await startTestService(store as QuotaStore, policies);
    try {
      for (const policy of names) await service.client.getQuota({ policy, identity: { user: 'm' } });
      expect(store.space.keys(clock.now())).toEqual([]);
      await service.client.allow({ policy: 'bucket', identity: { user: 'm' }, cost: 4 });
      for (let i = 0; i < 5; i++) expect((await service.client.getQuota({ policy: 'bucket', identity: { user: 'm' } })).limits[0]?.remaining).toBe(6);
    } finally {
      await service.stop();
      await store.close();
    }
  });
});
