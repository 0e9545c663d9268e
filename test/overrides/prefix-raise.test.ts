import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { identityKey, OVERRIDE_WILDCARDS_KEY, overrideGenerationKey, PARAMETER_SOURCE, parsePolicies } from '@quota-service/core';
import type { QuotaEngine } from '../../src/engine/engine.js';
import { GenerationNotRaisedError } from '../../src/overrides/cluster-generations.js';
import { SLOTS, slotTags } from '../../src/overrides/slot-tags.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { adminSetup, replicaOf } from '../support/admin-fixture.js';
import { useClusterFixture } from '../support/use-redis.js';

/**
 * A prefix override change on a Redis Cluster raises the override generation
 * of every slot before the admin call returns. When part of the cluster
 * refuses the writes, the call fails and says to repeat it; the slots left
 * behind keep the previous generation, so a replica that has not read the
 * change may go on applying the previous overrides there; a repeat brings
 * every slot up to date, and every replica applies the change.
 */
const policies = parsePolicies(
  stringify({ policies: { api: { limits: [{ name: 'calls', key_by: 'tenant', algorithm: 'token_bucket', capacity: 5, refill_per_second: 1 }] } } }),
);
const LOOPBACK = { name: 'tester', peer: '127.0.0.1:1' };
const { wildcardOverride: WILDCARD, default: DEFAULT } = PARAMETER_SOURCE;

async function calls(engine: QuotaEngine, tenant: string) {
  const status = (await engine.allow({ policy: 'api', identity: { tenant }, cost: 1, requestId: '' })).limits[0]!;
  return { limit: status.limit, applied: status.applied };
}

describe('prefix override generations on a Redis Cluster', () => {
  const { cluster, fixture } = useClusterFixture();

  it('a change that some slots refuse fails, saying to repeat it; the repeat raises every slot and every replica applies it', async () => {
    const f = fixture();
    const s = adminSetup(f, policies);
    const other = RedisStore.connectCluster(cluster().seeds, { clock: f.clock });
    await other.ready();
    const stale = replicaOf(f, policies, other);
    const masters = (await cluster().topology()).shards.map((shard) => shard.masterPort);
    try {
      // A master that does not hold the registry, and a tenant of the prefix whose key it holds.
      const registryOwner = await cluster().ownerOf(OVERRIDE_WILDCARDS_KEY);
      const refusing = masters.find((port) => port !== registryOwner)!;
      let tenant = '';
      for (let i = 0; tenant === ''; i++) if ((await cluster().ownerOf(identityKey('calls', 'tenant', `pre-${i}`))) === refusing) tenant = `pre-${i}`;
      expect(await calls(stale, tenant)).toMatchObject({ limit: 5, applied: DEFAULT });

      // That master refuses writes (it has 1 replica, not 5).
      await cluster().node(refusing).config('SET', 'min-replicas-to-write', '5');
      const change = () =>
        s.admin.setOverride(
          {
            target: { limit: 'calls', match: 'prefix', value: 'pre-' },
            parameters: { algorithm: 'token_bucket', fields: { capacity: 50 } },
            ttlMs: 0,
            reason: '',
          },
          LOOPBACK,
        );
      const failed = await change().catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(GenerationNotRaisedError);
      expect((failed as Error).message).toMatch(
        /^the prefix override change is stored, but \d+ of 16384 cluster slots could not be told of it.*repeat the call/,
      );
      // Writable again: the replica that has not read the change goes on with the previous parameters in those slots.
      await cluster().node(refusing).config('SET', 'min-replicas-to-write', '0');
      expect(await calls(stale, tenant)).toMatchObject({ limit: 5, applied: DEFAULT });

      await change();
      expect(await calls(stale, tenant)).toMatchObject({ limit: 50, applied: WILDCARD });
      const registry = await (f.store as RedisStore).client.hget(OVERRIDE_WILDCARDS_KEY, 'gen');
      const tags = slotTags();
      // Read on a client of the test's own, without the store's 1 s command timeout, which
      // 16,384 GETs at once can outlast on a busy machine.
      const reader = cluster().client();
      const generations: Array<string | null> = [];
      for (let from = 0; from < SLOTS; from += 1024) {
        const slots = Array.from({ length: Math.min(1024, SLOTS - from) }, (_, i) => from + i);
        generations.push(...(await Promise.all(slots.map((slot) => reader.get(overrideGenerationKey(tags[slot]!))))));
      }
      expect(new Set(generations)).toEqual(new Set([registry]));
    } finally {
      for (const port of masters) await cluster().node(port).config('SET', 'min-replicas-to-write', '0');
      await other.close();
    }
  });
});
