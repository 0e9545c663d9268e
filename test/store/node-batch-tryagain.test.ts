import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GroupDecision, identityKey, type LimitCall, VirtualClock } from '@quota-service/core';
import { keySlot } from '../../src/store/redis/key-slot.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { scriptCalls } from '../support/script-calls.js';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';
import { decideGroups } from '../support/store-calls.js';

/**
 * A node batch meets a call whose keys (one slot) are split between two nodes
 * in the middle of a migration: the window's key already moved, the bucket's
 * not yet. The call's first read of the moved key fails before it wrote
 * anything, so it comes back not run and goes again alone, by its slot; alone,
 * the source answers TRYAGAIN (a multi-key call whose keys are partly
 * migrated) until the migration ends (the client retries a TRYAGAIN on a
 * node of its choice, which redirects it when it is not the owner), and the call runs once on
 * the new owner. The other calls of its batch are decided in the batch, once.
 * Virtual time is frozen: no bucket refills.
 */
const bucket = limitFrom({ name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 0.25 });
const window = limitFrom({ name: 'fw', key_by: 'user', algorithm: 'fixed_window', limit: 5, window: 'hour' });
const bucketKey = (user: string) => identityKey('tb', 'user', user);
const windowKey = (user: string) => window.algorithm.scriptKeys(identityKey('fw', 'user', user), window.params)[0]!;
const callsOf = (user: string, cost: number): LimitCall[] => [
  { limit: bucket, identityKey: bucketKey(user), cost },
  { limit: window, identityKey: identityKey('fw', 'user', user), cost },
];
const remaining = (answer: GroupDecision | Error) => (answer instanceof Error ? String(answer) : answer.outcomes.map((o) => [o.allowed, o.remaining]));

describe('a node batch over a slot whose keys are split between two nodes mid-migration', () => {
  const cluster = useRedisCluster();
  let store: RedisStore;
  beforeAll(async () => {
    store = RedisStore.connectCluster(cluster().seeds, { clock: new VirtualClock(T0) });
    await store.ready();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('the split call is sent again alone through TRYAGAIN and runs once on the new owner; the rest of its batch runs once where it is', async () => {
    const node = (port: number) => cluster().node(port);
    const slot = keySlot(bucketKey('a'));
    const source = await cluster().ownerOf('{a}');
    const { shards } = await cluster().topology();
    const target = shards.map((s) => s.masterPort).find((port) => port !== source)!;
    const rest = shards.map((s) => s.masterPort).filter((port) => port !== source && port !== target);
    // Two more users on the source, in other slots: they share the node batch of "a".
    const others: string[] = [];
    for (let i = 0; others.length < 2; i++) {
      const user = `u${i}`;
      if (keySlot(bucketKey(user)) !== slot && (await cluster().ownerOf(`{${user}}`)) === source) others.push(user);
    }
    const users = ['a', ...others];
    // Both keys of every user exist: 10 - 2 tokens, 2 of 5 in the window.
    const first = await decideGroups(
      store,
      users.map((user) => callsOf(user, 2)),
      'spend',
    );
    expect(first.map(remaining)).toEqual(
      users.map(() => [
        [true, 8],
        [true, 3],
      ]),
    );

    const idOf = async (port: number) => String(await node(port).call('CLUSTER', 'MYID'));
    const [sourceId, targetId] = [await idOf(source), await idOf(target)];
    await node(target).call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', sourceId);
    await node(source).call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', targetId);
    // Only the window's key moves for now: the slot's keys are split between the two nodes.
    await node(source).call('MIGRATE', '127.0.0.1', String(target), '', '0', '5000', 'KEYS', windowKey('a'));
    const keysInSlot = (port: number) => node(port).call('CLUSTER', 'GETKEYSINSLOT', String(slot), '10');
    expect([await keysInSlot(source), await keysInSlot(target)]).toEqual([[bucketKey('a')], [windowKey('a')]]);
    await Promise.all(shards.map((s) => node(s.masterPort).config('RESETSTAT')));

    const tryAgains = async () => Number(/errorstat_TRYAGAIN:count=(\d+)/.exec(await node(source).info('errorstats'))?.[1] ?? 0);
    // One turn: the three users' calls go to the source as one node batch.
    const batch = decideGroups(
      store,
      users.map((user) => callsOf(user, 1)),
      'spend',
    );
    // The split call, sent again alone, met TRYAGAIN at least once: now the migration ends.
    const deadline = Date.now() + 10_000;
    while ((await tryAgains()) === 0) {
      if (Date.now() > deadline) throw new Error('the source never answered TRYAGAIN');
    }
    await node(source).call('MIGRATE', '127.0.0.1', String(target), '', '0', '5000', 'KEYS', bucketKey('a'));
    // The target first, then the source, then the others: as redis-cli --cluster reshard does.
    for (const port of [target, source, ...rest]) await node(port).call('CLUSTER', 'SETSLOT', String(slot), 'NODE', targetId);
    const answers = await batch;

    expect(answers.map(remaining)).toEqual(
      users.map(() => [
        [true, 7],
        [true, 2],
      ]),
    );
    // The node batch ran once on the source; the split call ran once, alone, on the target (a
    // call refused with TRYAGAIN, ASK or MOVED is not a call in INFO commandstats).
    expect(await scriptCalls(node(source))).toBe(1);
    expect(await scriptCalls(node(target))).toBe(1);
    // Spent once each: 10 - 2 - 1 tokens and 3 in the window, for "a" on the target, the others on the source.
    const peek = await decideGroups(
      store,
      users.map((user) => callsOf(user, 0)),
      'peek',
    );
    expect(peek.map(remaining)).toEqual(
      users.map(() => [
        [true, 7],
        [true, 2],
      ]),
    );
    expect(await node(target).hget(bucketKey('a'), 'tokens')).toBe('7');
    for (const user of others) expect(await node(source).hget(bucketKey(user), 'tokens')).toBe('7');
  }, 60_000);
});
