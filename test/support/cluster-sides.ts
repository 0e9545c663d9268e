import { afterAll, beforeAll } from 'vitest';
import { type Decision, type PolicySet, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { MemoryStore } from '../../src/store/memory.js';
import { keySlot } from '../../src/store/redis/key-slot.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { RedisCluster } from './redis-cluster.js';
import { scriptCalls } from './script-calls.js';
import { T0 } from './store-fixtures.js';
import { useRedisCluster } from './use-redis.js';

// Three engines deciding the same requests on one virtual clock, for tests
// that hold batching on a Redis Cluster to deciding one by one and to the
// model (test/store/cluster-batch-equivalence.test.ts): `batched` on a
// cluster of its own, `oneByOne` on another with batching off, `model` on
// the embedded store.

/** What every side answered: a decision, or the error allow() rejected with (message only). */
export type Answer = Decision | { error: string };
export const answerOf = (settled: PromiseSettledResult<Decision>): Answer =>
  settled.status === 'fulfilled' ? comparable(settled.value) : { error: String((settled.reason as Error).message) };

/**
 * A decision as the sides are compared: every field but `leasesExpired`, the
 * count of expired leases a call dropped (for a metric). Redis expires a lease
 * set on its own clock, which the test clock does not move, so it still holds
 * leases the model's set has dropped with the set; the decision fields
 * (allowed, remaining, leases held, times) are compared whole.
 */
export function comparable(decision: Decision): Decision {
  const { leasesExpired: _dropped, ...rest } = decision as Decision & { leasesExpired?: number };
  return rest;
}

export interface Sides {
  clock: VirtualClock;
  model: QuotaEngine;
  batched: QuotaEngine;
  oneByOne: QuotaEngine;
  reset(): Promise<void>;
  /** Which master (0, 1, 2: the shards in slot order) serves `key` on the batched side. */
  masterOf(key: string): number;
  /** Script calls the batched side's masters ran since the last reset. */
  batchedScriptCalls(): Promise<number>;
  close(): Promise<void>;
}

function masters(cluster: RedisCluster) {
  return cluster.topology().then(({ shards }) => shards.map((shard) => cluster.node(shard.masterPort)));
}

export function useSides(policies: PolicySet): () => Sides {
  const clusterA = useRedisCluster();
  const clusterB = useRedisCluster();
  let sides: Sides | undefined;
  beforeAll(async () => {
    const clock = new VirtualClock(T0);
    const memory = new MemoryStore(clock);
    const batchedStore = RedisStore.connectCluster(clusterA().seeds, { clock: clock });
    const oneByOneStore = RedisStore.connectCluster(clusterB().seeds, { clock: clock, batch: false });
    await Promise.all([batchedStore.ready(), oneByOneStore.ready()]);
    const { shards } = await clusterA().topology();
    sides = {
      masterOf: (key) => {
        const slot = keySlot(key);
        return shards.findIndex((shard) => shard.slots.some(([first, last]) => slot >= first && slot <= last));
      },
      clock,
      model: new QuotaEngine(policies, memory),
      batched: new QuotaEngine(policies, batchedStore),
      oneByOne: new QuotaEngine(policies, oneByOneStore),
      async reset() {
        memory.space.clear();
        const nodes = [...(await masters(clusterA())), ...(await masters(clusterB()))];
        await Promise.all(nodes.map((node) => node.flushall()));
        await Promise.all((await masters(clusterA())).map((node) => node.config('RESETSTAT')));
        clock.set(T0);
      },
      batchedScriptCalls: async () => (await Promise.all((await masters(clusterA())).map(scriptCalls))).reduce((a, b) => a + b, 0),
      close: async () => {
        await Promise.all([batchedStore.close(), oneByOneStore.close(), memory.close()]);
      },
    };
  });
  afterAll(async () => {
    await sides?.close();
  });
  return () => sides!;
}
