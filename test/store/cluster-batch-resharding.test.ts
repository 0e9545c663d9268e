import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type AllowInput, type Decision, parsePolicies, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { scriptCalls } from '../support/script-calls.js';
import { useRedisCluster } from '../support/use-redis.js';

/**
 * Resharding while batches run: the slot of "a" (user a and tenant a) moves to
 * another master while AllowBatch-sized batches keep coming, the migration's
 * steps racing the batches (SETSLOT IMPORTING/MIGRATING, MIGRATE of the slot's
 * keys, SETSLOT NODE). A node batch's call whose keys its node no longer
 * serves comes back unrun and goes again alone, following ASK and MOVED; a
 * call that ran is never sent again. So every decision equals the model's: a
 * call lost would fail, a call run twice would spend twice.
 *
 * Buckets refill slowly and windows are hours long, so no key expires on
 * Redis's real clock during the test (which would split a user's two keys
 * between the nodes mid-migration); the bucket rates are exact binary
 * fractions, so a refunded balance is the untouched one bit for bit.
 */
const SLOT_OF_A = 15495;
const policies = parsePolicies(
  stringify({
    policies: {
      bucket: { limits: [{ name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 0.25 }] },
      window: { limits: [{ name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 12, window: 'hour' }] },
      multi: {
        limits: [
          { name: 'm-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 8, refill_per_second: 0.0152587890625 },
          { name: 'm-user', key_by: 'user', algorithm: 'fixed_window', limit: 6, window: 'hour' },
          { name: 'm-tenant', key_by: 'tenant', algorithm: 'fixed_window', limit: 14, window: 'hour' },
        ],
      },
    },
  }),
);

/** 01:01 on a day: an hour's window has 59 minutes left, far more than the test's virtual time moves. */
const START = Date.UTC(2026, 10, 21, 1, 1, 0);
const BATCHES = 60;

/** A batch: single-limit requests (an identity may repeat), and user + tenant requests that share no key. */
const batch = fc.record({
  dt: fc.integer({ min: 0, max: 2_000 }),
  single: fc.array(
    fc.record({ policy: fc.constantFrom('bucket', 'window'), user: fc.constantFrom('a', 'a', 'a', 'b', 'c'), cost: fc.integer({ min: 1, max: 3 }) }),
    { maxLength: 24, size: 'max' },
  ),
  multi: fc
    .uniqueArray(
      fc.record({ user: fc.constantFrom('a', 'b', 'c', 'd'), tenant: fc.constantFrom('a', 't1', 't2', 't3'), cost: fc.integer({ min: 1, max: 2 }) }),
      {
        maxLength: 4,
        selector: (r) => r.user,
      },
    )
    .filter((requests) => new Set(requests.map((r) => r.tenant)).size === requests.length),
});

describe('resharding while batches run (ASK, TRYAGAIN-free moves, MOVED)', () => {
  const cluster = useRedisCluster();
  let store: RedisStore;
  let memory: MemoryStore;
  const clock = new VirtualClock(START);
  beforeAll(async () => {
    store = RedisStore.connectCluster(cluster().seeds, { clock: clock });
    memory = new MemoryStore(clock);
    await store.ready();
  });
  afterAll(async () => {
    await store?.close();
    await memory?.close();
  });

  it('every decision of every batch equals the model while the slot of "a" migrates and after it moved; no error, nothing lost or doubled', async () => {
    const onCluster = new QuotaEngine(policies, store);
    const model = new QuotaEngine(policies, memory);
    const source = await cluster().ownerOf('{a}');
    const { shards } = await cluster().topology();
    const target = shards.map((shard) => shard.masterPort).find((port) => port !== source)!;
    const others = shards.map((shard) => shard.masterPort).filter((port) => port !== source && port !== target);
    const idOf = async (port: number) => String(await cluster().node(port).call('CLUSTER', 'MYID'));
    const [sourceId, targetId] = [await idOf(source), await idOf(target)];
    const node = (port: number) => cluster().node(port);
    const errorstat = async (port: number, reply: string) =>
      Number(new RegExp(`errorstat_${reply}:count=(\\d+)`).exec(await node(port).info('errorstats'))?.[1] ?? 0);
    const [asksBefore, movedBefore] = [await errorstat(source, 'ASK'), await errorstat(source, 'MOVED')];
    await Promise.all(shards.map((shard) => node(shard.masterPort).config('RESETSTAT')));

    /** The migration, step by step: each runs alongside a batch, not between two. */
    const migrate = async (i: number) => {
      if (i === 10) {
        await node(target).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'IMPORTING', sourceId);
        await node(source).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'MIGRATING', targetId);
      }
      if (i === 20 || i === 30) {
        // All of the slot's keys in one MIGRATE: a call's keys are never split between the nodes.
        const keys = (await node(source).call('CLUSTER', 'GETKEYSINSLOT', String(SLOT_OF_A), '1000')) as string[];
        if (keys.length > 0) await node(source).call('MIGRATE', '127.0.0.1', String(target), '', '0', '5000', 'KEYS', ...keys);
      }
      if (i === 40) {
        // The target first, then the source, then the others: as redis-cli --cluster reshard does.
        for (const port of [target, source, ...others]) await node(port).call('CLUSTER', 'SETSLOT', String(SLOT_OF_A), 'NODE', targetId);
      }
    };

    const runs = fc.sample(batch, { numRuns: BATCHES, seed: 23 });
    let now = START;
    let decided = 0;
    let ofSlotA = 0;
    for (const [i, { dt, single, multi }] of runs.entries()) {
      now += dt;
      clock.set(now);
      const inputs: AllowInput[] = [
        ...single.map(({ policy, user, cost }) => ({ policy, identity: { user }, cost, requestId: '' })),
        ...multi.map(({ user, tenant, cost }) => ({ policy: 'multi', identity: { user, tenant }, cost, requestId: '' })),
      ];
      // The batch is issued in this turn; the migration step's commands go out alongside it.
      const [answers] = await Promise.all([onCluster.allowEach(inputs, (decision) => decision), migrate(i)]);
      for (const [j, input] of inputs.entries()) {
        const answer = answers[j]!;
        const context = `batch ${i}, request ${j}: ${JSON.stringify(input)}`;
        expect(answer.status === 'fulfilled' ? answer.value : String(answer.reason), context).toEqual(await model.allow(input));
        if (answer.status === 'fulfilled' && (answer.value as Decision).source !== 'store') throw new Error(`${context}: not decided by the store`);
        decided++;
        if (input.identity.user === 'a' || input.identity.tenant === 'a') ofSlotA++;
      }
    }

    expect(await cluster().ownerOf('{a}')).toBe(target);
    expect(decided).toBeGreaterThan(BATCHES * 8);
    expect(ofSlotA).toBeGreaterThan(decided / 3);
    // The source answered ASK while the slot migrated and MOVED after it moved, and the client followed both.
    expect(await errorstat(source, 'ASK')).toBeGreaterThan(asksBefore);
    expect(await errorstat(source, 'MOVED')).toBeGreaterThan(movedBefore);
    // Batched all along: far fewer script calls than decisions.
    const calls = (await Promise.all(shards.map((shard) => scriptCalls(node(shard.masterPort))))).reduce((a, b) => a + b, 0);
    expect(calls).toBeLessThan(decided / 2);
  }, 120_000);
});
