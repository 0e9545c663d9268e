import { spawn } from 'node:child_process';
import type { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { own, type OwnedChild } from '../support/owned-child.js';
import { TS_NODE_ARGS } from '../support/ts-node-args.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';

/**
 * Never over-grant with real processes and real time: five holder
 * processes (each a SliceHolder over its own RedisStore, as a service
 * instance or a client's process holds slices) hammer one hot identity on
 * one Redis, and on the 3+3 cluster; one of them is killed with SIGKILL
 * half-way, holding a slice. Everything granted (each process reports a
 * grant before it counts) stays within capacity + rate x T, T measured on
 * Redis's clock from before the first decision to after the last; the
 * killed holder's slice record lapses, its units staying spent.
 */
const RUN_MS = 3_000;
const LIMIT = {
  name: 'hot-budget',
  key_by: 'tenant',
  algorithm: 'token_bucket',
  // Below what five processes ask for on a busy machine (a few thousand units/s), so the bound is what limits them.
  capacity: 200,
  refill_per_second: 500,
  // A ttl long enough that the slice holder-2 holds is still live when it is killed.
  slices: { share: 0.2, max_units: 50, ttl_ms: 1_000 },
};

interface Holder {
  child: OwnedChild;
  granted: number;
  /** Resolves when it holds a slice with units left and decides no more ('hold'). */
  holding: Promise<void>;
  stopped: Promise<void>;
  done?: Record<string, number>;
  kill(): void;
}

async function startHolder(where: string, id: string, tenant: string, then = ''): Promise<Holder & { go(): void }> {
  const child = spawn(
    process.execPath,
    [...TS_NODE_ARGS, 'test/support/slice-holder-process.ts', where, id, tenant, JSON.stringify(LIMIT), String(RUN_MS), then],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  let holdingNow: () => void = () => {};
  let stopped: () => void = () => {};
  const holder = {
    child: own(child),
    granted: 0,
    holding: new Promise<void>((resolve) => {
      holdingNow = resolve;
    }),
    stopped: new Promise<void>((resolve) => {
      stopped = resolve;
    }),
    done: undefined as Record<string, number> | undefined,
    kill: () => child.kill('SIGKILL'),
    go: () => child.stdin.write('go\n'),
  };
  const lines = child.stdout.setEncoding('utf8');
  let buffered = '';
  let ready: () => void;
  const isReady = new Promise<void>((resolve) => {
    ready = resolve;
  });
  lines.on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    for (const line of parts) {
      if (line === 'ready') ready();
      else if (line === 'stopped') stopped();
      else if (line === 'holding') holdingNow();
      else if (line.startsWith('done ')) holder.done = JSON.parse(line.slice(5));
      else {
        holder.granted = Number(line.split(' ')[0]);
      }
    }
  });
  await isReady;
  return holder;
}

async function redisNow(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Number(micros) / 1000;
}

async function hammer(where: string, admin: Redis | Cluster, tenant: string, recordsOf: (holder: string) => Promise<number>): Promise<void> {
  // holder-2 decides until it holds a slice with units left, then stops and is killed.
  const holders = await Promise.all(Array.from({ length: 5 }, (_, i) => startHolder(where, `holder-${i}`, tenant, i === 2 ? 'hold' : '')));
  const start = await redisNow(admin);
  const killed = holders[2]!;
  // holder-2 first, on a full bucket, so that it surely holds a slice with units left when it is
  // killed (started with the others, on a bucket they keep near empty, it may never get one).
  killed.go();
  await Promise.race([killed.holding, new Promise((_, reject) => setTimeout(() => reject(new Error('holder-2 never held a slice with units left')), RUN_MS))]);
  killed.kill();
  await killed.child.exited;
  const heldAtKill = await recordsOf('holder-2');
  for (const holder of holders) if (holder !== killed) holder.go();
  // T ends when every survivor has stopped deciding (before it gives its slices back).
  const survivorsOnly = holders.filter((holder) => holder !== killed);
  await Promise.all(survivorsOnly.map((holder) => holder.stopped));
  const end = await redisNow(admin);
  await Promise.all(holders.map((holder) => holder.child.exited));
  const granted = holders.reduce((sum, holder) => sum + holder.granted, 0);
  const bound = LIMIT.capacity + (LIMIT.refill_per_second * (end - start)) / 1000;
  const survivors = holders.filter((holder) => holder !== killed).map((holder) => holder.done!);
  const local = survivors.reduce((sum, done) => sum + done.unitsGrantedLocally!, 0);
  console.log(
    `${where.startsWith('redis://') ? 'redis' : 'cluster'}: granted ${granted} of at most ${bound.toFixed(0)} over ${(end - start).toFixed(0)} ms; ` +
      `survivors ${JSON.stringify(survivors.map((done) => ({ decisions: done.decisions, storeCalls: done.storeCalls, local: done.unitsGrantedLocally })))}`,
  );
  expect(granted).toBeLessThanOrEqual(bound);
  expect(local).toBeGreaterThan(0);
  expect(killed.done).toBeUndefined();
  // The killed holder's slice record, when it held one, lapses (at most twice the ttl); nobody gives its units back.
  for (let i = 0; i < 150 && (await recordsOf('holder-2')) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await recordsOf('holder-2')).toBe(0);
  expect(heldAtKill).toBe(1);
}

describe('never over-grant: 5 holder processes, one killed with SIGKILL', () => {
  const redis = useRedisServer();
  const cluster = useRedisCluster();

  it('on one Redis', async () => {
    const admin = redis().client();
    await hammer(redis().url, admin, 'acme-one', async (holder) => (await admin.keys(`*:_slice:${holder}`)).length);
  }, 120_000);

  it('on the 3+3 cluster', async () => {
    const client = cluster().client();
    // The identity's keys share one slot: the master serving it holds the record.
    const recordsOf = async (holder: string) => client.exists(`rl:v1:hot-budget:tenant:{acme-cluster}:_slice:${holder}`);
    await hammer(cluster().seeds.join(','), client, 'acme-cluster', recordsOf);
  }, 120_000);
});
