// The store layer alone: RedisStore decisions with the driver's batch mode
// (one script call per round, src/store/redis/script-batcher.ts) vs one
// script call per decision, kinds alternating round by round on the same
// Redis. Each wave issues WAVE decisions at once, as one AllowBatch of the
// quota client does. Reports decisions/s, this process's CPU per decision,
// Redis CPU per decision (INFO cpu) and, from INFO commandstats, script calls,
// decisions per script call and Redis's µs per script call and per decision.
//
//   npx tsx bench/store-batch.ts [--seconds 3] [--rounds 3] [--wave 100]
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { identityKey, parsePolicies } from '@quota-service/core';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { decideLimit } from '../test/support/store-calls.js';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '3' }, rounds: { type: 'string', default: '3' }, wave: { type: 'string', default: '100' } },
});
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const WAVE = Number(values.wave);
/** Waves in flight at once, so Redis always has work queued (as several clients' batches would). */
const WAVES_IN_FLIGHT = 4;
const USERS = 10_000;

const limit = parsePolicies(
  stringify({ policies: { bench: { limits: [{ name: 'bench', key_by: 'user', algorithm: 'token_bucket', capacity: 1e9, refill_per_second: 1e6 }] } } }),
).get('bench')?.limits[0];
if (limit === undefined) throw new Error('no bench limit');
const keys = Array.from({ length: USERS }, (_, i) => identityKey('bench', 'user', String(i)));

interface Sample {
  decisions: number;
  ms: number;
  nodeUs: number;
  redisUs: number;
  scriptCalls: number;
  scriptUs: number;
}

async function stats(redis: Redis): Promise<{ cpuUs: number; calls: number; usec: number }> {
  const [cpu, commands] = await Promise.all([redis.info('cpu'), redis.info('commandstats')]);
  const read = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? 0);
  let calls = 0;
  let usec = 0;
  for (const m of commands.matchAll(/^cmdstat_(?:fcall|evalsha|eval):calls=(\d+),usec=(\d+)/gm)) {
    calls += Number(m[1]);
    usec += Number(m[2]);
  }
  return { cpuUs: (read('used_cpu_user') + read('used_cpu_sys')) * 1e6, calls, usec };
}

async function round(store: RedisStore, redis: Redis, seconds: number): Promise<Sample> {
  let next = 0;
  let decisions = 0;
  const before = await stats(redis);
  const cpu = process.cpuUsage();
  const started = performance.now();
  const until = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      const wave: Promise<unknown>[] = [];
      for (let i = 0; i < WAVE; i++) {
        wave.push(decideLimit(store, limit as NonNullable<typeof limit>, keys[next] as string, 1));
        next = (next + 1) % USERS;
      }
      await Promise.all(wave);
      decisions += WAVE;
    }
  };
  await Promise.all(Array.from({ length: WAVES_IN_FLIGHT }, worker));
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const after = await stats(redis);
  return {
    decisions,
    ms,
    nodeUs: used.user + used.system,
    redisUs: after.cpuUs - before.cpuUs,
    scriptCalls: after.calls - before.calls - 1,
    scriptUs: after.usec - before.usec,
  };
}

const server = await startRedisServer();
try {
  const stores = { batched: new RedisStore(server.client(), { batch: true }), single: new RedisStore(server.client(), { batch: false }) };
  const redis = server.client();
  for (const store of Object.values(stores)) await round(store, redis, 1); // warm-up: JIT, script cache, keys
  const samples: Record<string, Sample[]> = { batched: [], single: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [kind, store] of Object.entries(stores)) samples[kind]?.push(await round(store, redis, SECONDS));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  process.stdout.write(
    `RedisStore alone, token bucket, waves of ${WAVE} decisions, ${WAVES_IN_FLIGHT} waves in flight, ${ROUNDS} rounds x ${SECONDS} s per kind (medians)\n`,
  );
  process.stdout.write(
    '| kind | decisions/s | node µs/decision | redis µs/decision | decisions/script call | redis µs/script call | script µs/decision |\n|---|--:|--:|--:|--:|--:|--:|\n',
  );
  const rates: Record<string, number> = {};
  for (const [kind, list] of Object.entries(samples)) {
    const m = (f: (s: Sample) => number) => median(list.map(f));
    rates[kind] = m((s) => (s.decisions * 1000) / s.ms);
    process.stdout.write(
      `| ${kind} | ${rates[kind]?.toFixed(0)} | ${m((s) => s.nodeUs / s.decisions).toFixed(1)} | ${m((s) => s.redisUs / s.decisions).toFixed(1)} | ` +
        `${m((s) => s.decisions / s.scriptCalls).toFixed(1)} | ${m((s) => s.scriptUs / s.scriptCalls).toFixed(1)} | ${m((s) => s.scriptUs / s.decisions).toFixed(2)} |\n`,
    );
  }
  process.stdout.write(`ratio batched/single decisions/s: ${((rates.batched ?? 0) / (rates.single ?? 1)).toFixed(2)}\n`);
  await Promise.all(Object.values(stores).map((s) => s.close()));
  redis.disconnect();
} finally {
  await server.stop();
}
