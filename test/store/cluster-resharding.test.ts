import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { limitFrom, clusterFixture, memoryFixture } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';
import { runInLockStep, type Step } from '../support/lock-step.js';

/**
 * Resharding under load: the slot of identity "a" moves to another master in the
 * middle of a sequence (SETSLOT IMPORTING/MIGRATING, MIGRATE of its keys, SETSLOT
 * NODE), so decisions meet ASK while it migrates and MOVED once it has moved.
 *
 * Token bucket only: the fixed-window script writes a key it derives from its
 * declared KEYS[1] prefix, which never exists itself, so during a migration the
 * source node answers ASK and the target starts a fresh counter (reported with
 * issue 4; the script belongs to the algorithms refactor).
 */
const SLOT_OF_A = 15495;

describe('resharding a slot mid-sequence (ASK, then MOVED)', () => {
  const cluster = useRedisCluster();

  it('token bucket decisions equal the model while the slot of "a" migrates and after it moved', async () => {
    const model = memoryFixture();
    const onCluster = clusterFixture(cluster());
    await onCluster.store.ready();
    const { shards } = await cluster().topology();
    const source = shards[2]!.masterPort; // slots 10922-16383
    const target = shards[0]!.masterPort;
    const idOf = async (port: number) => String(await cluster().node(port).call('CLUSTER', 'MYID'));
    const [sourceId, targetId] = [await idOf(source), await idOf(target)];

    const steps: Step[] = fc.sample(
      fc.record({ step: fc.integer({ min: 0, max: 2_000 }), share: fc.double({ min: 0, max: 1, noNaN: true }), who: fc.constantFrom('a', 'a', 'a', 'b', 'c') }),
      { numRuns: 240, seed: 11 },
    );
    const reshard = async (i: number) => {
      if (i === 60) {
        await cluster().node(target).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'IMPORTING', sourceId);
        await cluster().node(source).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'MIGRATING', targetId);
      }
      if (i === 120) {
        // Move the slot's keys (the bucket of "a") while decisions keep coming.
        const keys = (await cluster().node(source).call('CLUSTER', 'GETKEYSINSLOT', String(SLOT_OF_A), '100')) as string[];
        if (keys.length > 0) await cluster().node(source).call('MIGRATE', '127.0.0.1', String(target), '', '0', '5000', 'KEYS', ...keys);
      }
      if (i === 180) {
        for (const shard of shards) await cluster().node(shard.masterPort).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'NODE', targetId);
      }
    };
    const limit = limitFrom({ name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
    await runInLockStep([model, onCluster], limit, Date.UTC(2026, 10, 21, 10, 0, 0), steps, reshard);

    await cluster().waitHealthy();
    expect(await cluster().ownerOf('{a}')).toBe(target);
    const errorstat = async (port: number, reply: string) =>
      Number(new RegExp(`errorstat_${reply}:count=(\\d+)`).exec(await cluster().node(port).info('errorstats'))?.[1] ?? 0);
    // Both redirections really happened and were followed.
    expect(await errorstat(source, 'ASK')).toBeGreaterThan(0);
    expect(await errorstat(source, 'MOVED')).toBeGreaterThan(0);
    await onCluster.store.close();
  });
});
