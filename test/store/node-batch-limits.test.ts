import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type GroupDecision, identityKey, type LimitCall, VirtualClock } from '@quota-service/core';
import { keySlot } from '../../src/store/redis/key-slot.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { scriptCalls } from '../support/script-calls.js';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { useRedisCluster } from '../support/use-redis.js';
import { decideGroups } from '../support/store-calls.js';

/**
 * A node batch stays short, as a batch on one node does (BATCH_LIMITS,
 * test/store/script-batch.test.ts): at most 100 calls and 512 keys per script
 * call. One turn's calls for users of one master: 200 calls are 2 script
 * calls there and 201 are 3; 85 calls of 6 keys (510) are one script call and
 * 86 (516) are 2. The other masters run none.
 */
const bucket = limitFrom({ name: 'tb', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
const six = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'].map((name) =>
  limitFrom({ name, key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 }),
);
const oneLimit = (user: string): LimitCall[] => [{ limit: bucket, identityKey: identityKey('tb', 'user', user), cost: 1 }];
const sixLimits = (user: string): LimitCall[] => six.map((limit) => ({ limit, identityKey: identityKey(limit.name, 'user', user), cost: 1 }));

describe('node batches keep to the batch limits: 100 calls, 512 keys', () => {
  const cluster = useRedisCluster();
  let store: RedisStore;
  let masterPorts: number[];
  /** 201 users whose slots the first master serves. */
  let users: string[];
  beforeAll(async () => {
    store = RedisStore.connectCluster(cluster().seeds, { clock: new VirtualClock(T0) });
    await store.ready();
    const { shards } = await cluster().topology();
    masterPorts = shards.map((s) => s.masterPort);
    const [first, last] = shards[0]!.slots[0]!;
    users = [];
    for (let i = 0; users.length < 201; i++) {
      const slot = keySlot(identityKey('tb', 'user', `u${i}`));
      if (slot >= first && slot <= last) users.push(`u${i}`);
    }
    expect(await cluster().ownerOf(`{${users[200]}}`)).toBe(masterPorts[0]);
  });
  beforeEach(async () => {
    await Promise.all(masterPorts.map((port) => cluster().node(port).flushall()));
    // The batch script is known on every master's connection (the first call sends EVAL).
    await decideGroups(
      store,
      users.slice(0, 2).map((user) => sixLimits(user)),
      'peek',
    );
    await Promise.all(masterPorts.map((port) => cluster().node(port).config('RESETSTAT')));
  });
  afterAll(async () => {
    await store?.close();
  });

  const callsOn = async () => Promise.all(masterPorts.map((port) => scriptCalls(cluster().node(port))));
  const allGranted = (answers: Array<GroupDecision | Error>, remaining: number) =>
    answers.every((answer) => !(answer instanceof Error) && answer.outcomes.every((o) => o.allowed && o.remaining === remaining));

  it.each([
    [200, 2],
    [201, 3],
  ])('%i one-key calls of one turn for one master: %i script calls there', async (count, scriptCallsThere) => {
    const answers = await decideGroups(
      store,
      users.slice(0, count).map((user) => oneLimit(user)),
      'spend',
    );
    expect(allGranted(answers, 9)).toBe(true);
    expect(await callsOn()).toEqual([scriptCallsThere, 0, 0]);
  });

  it.each([
    [85, 1],
    [86, 2],
  ])('%i calls of 6 keys of one turn for one master: %i script calls there', async (count, scriptCallsThere) => {
    const answers = await decideGroups(
      store,
      users.slice(0, count).map((user) => sixLimits(user)),
      'spend',
    );
    expect(allGranted(answers, 9)).toBe(true);
    expect(await callsOn()).toEqual([scriptCallsThere, 0, 0]);
  });
});
