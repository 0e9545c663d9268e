import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type AllowInput, parsePolicies, VirtualClock } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { MemoryStore } from '../../src/store/memory.js';
import { keySlot } from '../../src/store/redis/key-slot.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { scriptCalls } from '../support/script-calls.js';
import { useRedisCluster } from '../support/use-redis.js';

/**
 * A request whose limits lie in two slots of one master (user + tenant) is
 * one script call there, all or nothing, instead of a reservation in one
 * slot and then a spend in the other. When the client's slot map is stale
 * (one of the slots moved to another master), that call runs nothing and the
 * request is decided slot by slot: the decisions stay the model's.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      multi: {
        limits: [
          { name: 'user-bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 5, refill_per_second: 0.0009765625 },
          { name: 'tenant-hour', key_by: 'tenant', algorithm: 'fixed_window', limit: 7, window: 'hour' },
        ],
      },
    },
  }),
);
/** 01:01 on a day: the hour's window outlasts the test's virtual time. */
const START = Date.UTC(2026, 10, 25, 1, 1, 0);

describe('two slots on one master', () => {
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

  /** A tenant value whose slot is not the user's but is served by the user's master, never used before. */
  async function tenantBesides(user: string, prefix: string): Promise<{ tenant: string; master: number }> {
    const master = await cluster().ownerOf(`{${user}}`);
    const userSlot = keySlot(`{${user}}`);
    for (let i = 0; ; i++) {
      const tenant = `${prefix}-${i}`;
      if (keySlot(`{${tenant}}`) !== userSlot && (await cluster().ownerOf(`{${tenant}}`)) === master) return { tenant, master };
    }
  }

  /** The sequence: more than the user's bucket and the tenant's window hold, with a second user of the same tenant. */
  const sequence = (user: string, other: string, tenant: string): AllowInput[] =>
    [user, user, other, user, other, user, user, other, user, other, other].map((u, i) => ({
      policy: 'multi',
      identity: { user: u, tenant },
      cost: 1 + (i % 2),
      requestId: '',
    }));

  it('one script call per request (Allow and AllowBatch), every decision the model’s, nothing spent by a denied request', async () => {
    const { tenant, master } = await tenantBesides('one-master-u', 'one-master-t');
    const other = 'one-master-v';
    const onCluster = new QuotaEngine(policies, store);
    const model = new QuotaEngine(policies, memory);
    const node = cluster().node(master);
    const inputs = sequence('one-master-u', other, tenant);
    // Both users on the tenant's master too, so every request is whole on one master.
    const onMaster: AllowInput[] = [];
    for (const input of inputs) if ((await cluster().ownerOf(`{${input.identity.user}}`)) === master) onMaster.push(input);
    expect(onMaster.length).toBeGreaterThan(4);

    await node.config('RESETSTAT');
    for (const input of onMaster) expect(await onCluster.allow(input), JSON.stringify(input)).toEqual(await model.allow(input));
    expect(await scriptCalls(node)).toBe(onMaster.length);

    // The same through one batch: one phase, one node batch.
    const batchTenant = (await tenantBesides('one-master-u', 'one-master-b')).tenant;
    const batch = onMaster.map((input) => ({ ...input, identity: { ...input.identity, tenant: batchTenant } }));
    await node.config('RESETSTAT');
    const answers = await onCluster.allowEach(batch, (decision) => decision);
    const expected = [];
    for (const input of batch) expected.push(await model.allow(input));
    expect(answers.map((answer) => (answer.status === 'fulfilled' ? answer.value : String(answer.reason)))).toEqual(expected);
    expect(await scriptCalls(node)).toBe(1);
    // Some were denied (all or nothing): the tenant window counts only what was granted.
    expect(expected.some((decision) => !decision.allowed)).toBe(true);
  });

  it('a slot that moved away under a stale slot map: the whole call runs nothing, the request is decided slot by slot', async () => {
    const user = 'moved-u';
    const { tenant, master } = await tenantBesides(user, 'moved-t');
    const slot = keySlot(`{${tenant}}`)!;
    const { shards } = await cluster().topology();
    const target = shards.map((shard) => shard.masterPort).find((port) => port !== master)!;
    const targetId = String(await cluster().node(target).call('CLUSTER', 'MYID'));
    // The tenant's slot holds no key yet: it moves by SETSLOT NODE alone, told to every master but not to the client.
    for (const shard of shards) await cluster().node(shard.masterPort).call('CLUSTER', 'SETSLOT', String(slot), 'NODE', targetId);
    expect(await cluster().ownerOf(`{${tenant}}`)).toBe(target);
    const partitionOf = (key: string) => store.parts.partitionOf([{ limit: policies.get('multi')!.limits[0]!, identityKey: key, cost: 1 }]);
    expect(partitionOf(`{${tenant}}`)).toBe(partitionOf(`{${user}}`));

    const onCluster = new QuotaEngine(policies, store);
    const model = new QuotaEngine(policies, memory);
    const inputs = sequence(user, user, tenant);
    const [first, ...rest] = inputs;
    // Allow, then a batch: the first tries the whole call on the old master, the rest follow the refreshed map.
    expect(await onCluster.allow(first!)).toEqual(await model.allow(first!));
    const answers = await onCluster.allowEach(rest, (decision) => decision);
    for (const [j, input] of rest.entries()) {
      const answer = answers[j]!;
      expect(answer.status === 'fulfilled' ? answer.value : String(answer.reason), JSON.stringify(input)).toEqual(await model.allow(input));
    }
    // The tenant's window lives where its slot is now, and both limits stand where the model's do: nothing spent twice or lost.
    expect(await cluster().node(target).keys(`*{${tenant}}*`)).not.toEqual([]);
    expect(await cluster().node(master).keys(`*{${tenant}}*`)).toEqual([]);
    const peek = { policy: 'multi', identity: { user, tenant } };
    expect(await onCluster.getQuota(peek)).toEqual(await model.getQuota(peek));
  });
});
