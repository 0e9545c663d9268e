import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { T0 } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';

/** The gRPC service end to end on a Redis Cluster store, configured as QUOTA_REDIS_CLUSTER would. */
describe('Allow over gRPC on a Redis Cluster (Redis clock)', () => {
  const cluster = useRedisCluster();
  let service: TestService;
  let store: RedisStore;
  beforeAll(async () => {
    store = RedisStore.connectCluster(cluster().seeds);
    service = await startTestService(store);
  });
  afterAll(async () => {
    await service?.stop();
    await store?.close();
  });

  it('orders: 10 allowed then a denial, for users on each of the three masters', async () => {
    const owners = new Set<number>();
    for (const user of ['a', 'b', 'c']) {
      owners.add(await cluster().ownerOf(`{${user}}`));
      const decisions = [];
      for (let i = 0; i < 11; i++) decisions.push(await service.client.allow({ policy: 'orders', identity: { user } }));
      expect(decisions.map((d) => d.allowed)).toEqual([...Array(10).fill(true), false]);
      expect(decisions[10]).toMatchObject({ deniedBy: 'orders', limits: [{ name: 'orders', algorithm: 'token_bucket', limit: 10 }] });
      expect(
        await cluster()
          .node(await cluster().ownerOf(`{${user}}`))
          .exists(`rl:v1:orders:user:{${user}}`),
      ).toBe(1);
    }
    expect(owners.size).toBe(3);
  });

  it("tenant per minute: a fixed window on the tenant's shard", async () => {
    expect((await service.client.allow({ policy: 'tenant', identity: { tenant: 'acme' }, cost: 2000 })).allowed).toBe(true);
    const denied = await service.client.allow({ policy: 'tenant', identity: { tenant: 'acme' } });
    expect(denied).toMatchObject({ allowed: false, deniedBy: 'tenant-per-minute' });
    const owner = cluster().node(await cluster().ownerOf('{acme}'));
    expect(await owner.keys('rl:v1:tenant-per-minute:tenant:{acme}:minute')).toHaveLength(1);
  });

  it('one token left, 50 simultaneous calls over 3 service instances with their own cluster clients: exactly one allowed', async () => {
    const clock = new VirtualClock(T0);
    const stores = [0, 1, 2].map(() => RedisStore.connectCluster(cluster().seeds, { clock: clock }));
    const replicas = await Promise.all(stores.map((s) => startTestService(s)));
    try {
      expect((await replicas[0]!.client.allow({ policy: 'orders', identity: { user: 'race' }, cost: 9 })).allowed).toBe(true);
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) => replicas[i % 3]!.client.allow({ policy: 'orders', identity: { user: 'race' } })),
      );
      expect(responses.filter((r) => r.allowed)).toHaveLength(1);
      expect(responses.filter((r) => !r.allowed).every((r) => r.retryAfterMs === 500 && r.deniedBy === 'orders')).toBe(true);
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});
