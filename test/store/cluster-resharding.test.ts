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
 * Run for the token bucket and for the fixed window, each moving the slot on
 * from wherever it is. The fixed window used to write a key derived from a
 * declared prefix, so during a migration the target started a fresh counter;
 * its counter is now the one declared key (docs/keys.md), which ASK covers.
 */
const SLOT_OF_A = 15495;

describe('resharding a slot mid-sequence (ASK, then MOVED)', () => {
  const cluster = useRedisCluster();

  it.each([
    ['token bucket', { name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 }],
    ['fixed window', { name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 12, window: 'minute' }],
  ] as const)('%s decisions equal the model while the slot of "a" migrates and after it moved', async (_name, definition) => {
    const model = memoryFixture();
    const onCluster = clusterFixture(cluster());
    await onCluster.store.ready();
    const { shards } = await cluster().topology();
    const source = await cluster().ownerOf('{a}'); // first run: the master of slots 10922-16383
    const target = shards.map((shard) => shard.masterPort).find((port) => port !== source)!;
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
        if (keys.length > 0)
          await cluster()
            .node(source)
            .call('MIGRATE', '127.0.0.1', String(target), '', '0', '5000', 'KEYS', ...keys);
      }
      if (i === 180) {
        for (const shard of shards) await cluster().node(shard.masterPort).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'NODE', targetId);
      }
    };
    const limit = limitFrom(definition);
    const errorstatNow = async (port: number, reply: string) =>
      Number(new RegExp(`errorstat_${reply}:count=(\\d+)`).exec(await cluster().node(port).info('errorstats'))?.[1] ?? 0);
    const [asksBefore, movedBefore] = [await errorstatNow(source, 'ASK'), await errorstatNow(source, 'MOVED')];
    await runInLockStep([model, onCluster], limit, Date.UTC(2026, 10, 21, 10, 0, 0), steps, reshard);

    await cluster().waitHealthy();
    expect(await cluster().ownerOf('{a}')).toBe(target);
    const errorstat = async (port: number, reply: string) =>
      Number(new RegExp(`errorstat_${reply}:count=(\\d+)`).exec(await cluster().node(port).info('errorstats'))?.[1] ?? 0);
    // Both redirections really happened and were followed (counts are per node since its start).
    expect(await errorstat(source, 'ASK')).toBeGreaterThan(asksBefore);
    expect(await errorstat(source, 'MOVED')).toBeGreaterThan(movedBefore);
    await onCluster.store.close();
  });
});
