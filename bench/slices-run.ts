// `make bench`: one hot identity (a tenant-wide token bucket that never runs
// dry) at 1, 4, 16 and 64 calls in flight: the quota client with slices
// (docs/policies.md, "Slices") vs the same client with `slices: false` vs
// rate-limiter-flexible (RateLimiterRedis, in this process) on one key of the
// same Redis. Decisions/s, p50/p99, Redis script calls per 1,000 decisions and
// Redis CPU per decision. The goal: with slices at least 5x
// rate-limiter-flexible's decisions/s at every concurrency, and at most 20
// Redis calls per 1,000 decisions.
//
// --cluster: the same on a 3-master Redis Cluster, Redis calls and CPU those of
// the master that serves the hot key (where all of its load lands).
//
//   npx tsx bench/slices-run.ts [--seconds 3] [--warmup 1] [--concurrencies 1,4,16,64] [--cluster]
import { cpus, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { startRedisCluster } from '../test/support/redis-cluster.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { scriptCalls } from '../test/support/script-calls.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { writeBenchOut } from './bench-out.js';
import { startServerChild } from './children.js';
import { driveLoad } from './load.js';

const GOAL_RATIO = 5;
const GOAL_CALLS_PER_1000 = 20;
const TENANT = 'hot-tenant';

interface Kind {
  id: string;
  /** The Redis node whose calls and CPU count for this kind (the one serving its key); the default one when absent. */
  node?: Redis;
  call: () => Promise<boolean>;
  close(): Promise<void> | void;
}

async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return field('used_cpu_sys') + field('used_cpu_user');
}

function clientKind(id: string, port: number, slices: boolean): Kind {
  const client: QuotaClient = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 5_000, slices });
  return {
    id,
    call: async () => (await client.allow({ policy: 'bench-hot', identity: { tenant: TENANT } })).allowed,
    close: () => client.close(),
  };
}

function flexibleKind(client: Redis | Cluster): Kind {
  client.on('error', () => {});
  const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: 'flexible-hot', points: 1_000_000_000, duration: 3600 });
  return {
    id: 'flexible',
    call: async () => {
      await limiter.consume(TENANT, 1);
      return true;
    },
    close: () => client.disconnect(),
  };
}

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      seconds: { type: 'string', default: '3' },
      warmup: { type: 'string', default: '1' },
      concurrencies: { type: 'string', default: '1,4,16,64' },
      cluster: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const seconds = Number(values.seconds);
  const warmup = Number(values.warmup);
  const concurrencies = values.concurrencies.split(',').map(Number);
  run.watchdog(120_000 + concurrencies.length * 3 * (seconds + warmup + 5) * 1000);

  let where: string;
  let admin: Redis;
  let flexibleClient: Redis | Cluster;
  let flexibleNode: Redis | undefined;
  let serviceArgs: string[];
  if (values.cluster) {
    const cluster = await startRedisCluster({ replicas: false });
    run.onCleanup(() => cluster.stop());
    // The master serving the hot key carries all of its load: its calls and CPU are the ones that count.
    const port = await cluster.ownerOf(`rl:v1:bench-hot:tenant:{${TENANT}}`);
    admin = cluster.node(port);
    where = `a 3-master Redis Cluster (figures: the master on port ${port}, which serves the hot key)`;
    serviceArgs = ['--cluster', cluster.seeds.join(',')];
    flexibleNode = cluster.node(await cluster.ownerOf(`flexible-hot:${TENANT}`));
    flexibleClient = new Cluster(
      cluster.seeds.map((seed) => ({ host: '127.0.0.1', port: Number(seed.split(':')[1]) })),
      { enableOfflineQueue: false, enableAutoPipelining: true, redisOptions: { maxRetriesPerRequest: 1 } },
    );
  } else {
    const redis = await startRedisServer();
    run.onCleanup(() => redis.stop());
    admin = redis.client();
    where = `one Redis ${redis.url}`;
    serviceArgs = [redis.url];
    flexibleClient = new Redis(redis.url, { enableOfflineQueue: false, enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  }
  const service = await startServerChild('service', 'quota-server.ts', serviceArgs);
  run.onCleanup(() => service.stop());
  const flexible = flexibleKind(flexibleClient);
  // rate-limiter-flexible's key (`<prefix>:<key>`) may hash to another master: its own figures come from there.
  if (values.cluster) flexible.node = flexibleNode;
  const kinds: Kind[] = [clientKind('slices', service.port, true), clientKind('no-slices', service.port, false), flexible];
  run.onCleanup(async () => {
    for (const kind of kinds) await kind.close();
  });
  // The clients read ListPolicies at start: give it a moment.
  await new Promise((resolve) => setTimeout(resolve, 500));

  process.stdout.write(
    `One hot identity (policy bench-hot: a tenant-wide token bucket that never runs dry, slices share 0.05, max_units 1000, ttl_ms 250) on ${where};\n` +
      `slices = the quota client (default batching) with slices; no-slices = the same with slices: false; flexible = rate-limiter-flexible RateLimiterRedis in this process, one key.\n` +
      `${seconds} s per point after ${warmup} s of warm-up; node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  const rows: string[] = [
    '| in flight | kind | decisions/s | p50 ms | p99 ms | Redis calls / 1,000 decisions | Redis CPU µs / decision | errors |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const points: object[] = [];
  let met = true;
  let failed = false;
  for (const concurrency of concurrencies) {
    const rates = new Map<string, number>();
    for (const kind of kinds) {
      const call = () => kind.call();
      if (warmup > 0) await driveLoad({ call, concurrency, durationMs: warmup * 1000, graceMs: 5_000 });
      const node = kind.node ?? admin;
      const callsBefore = await scriptCalls(node);
      const cpuBefore = await redisCpuSeconds(node);
      const result = await driveLoad({ call, concurrency, durationMs: seconds * 1000, graceMs: 5_000 });
      const calls = (await scriptCalls(node)) - callsBefore;
      const cpu = (await redisCpuSeconds(node)) - cpuBefore;
      const decisions = result.calls;
      rates.set(kind.id, result.decisionsPerSecond);
      const { decisionsPerSecond, p50Ms, p95Ms, p99Ms, calls: answered, errors } = result;
      points.push({ kind: kind.id, concurrency, round: 1, decisionsPerSecond, p50Ms, p95Ms, p99Ms, calls: answered, errors });
      if (result.errors > 0) failed = true;
      rows.push(
        `| ${concurrency} | ${kind.id} | ${result.decisionsPerSecond.toFixed(0)} | ${result.p50Ms.toFixed(3)} | ${result.p99Ms.toFixed(3)} | ` +
          `${((1000 * calls) / Math.max(1, decisions)).toFixed(1)} | ${((cpu * 1e6) / Math.max(1, decisions)).toFixed(2)} | ${result.errors} |`,
      );
      if (kind.id === 'slices' && (1000 * calls) / Math.max(1, decisions) > GOAL_CALLS_PER_1000) met = false;
    }
    const ratio = (rates.get('slices') ?? 0) / (rates.get('flexible') ?? Number.POSITIVE_INFINITY);
    if (!(ratio >= GOAL_RATIO)) met = false;
    rows.push(`| ${concurrency} | slices / flexible | ${ratio.toFixed(1)}x | | | | | |`);
  }
  process.stdout.write(`${rows.join('\n')}\n\n`);
  writeBenchOut({
    kinds: [
      { id: 'slices', label: 'quota client, slices' },
      { id: 'no-slices', label: 'quota client, slices: false' },
      { id: 'flexible', label: 'rate-limiter-flexible' },
    ],
    points,
  });
  process.stdout.write(
    `goal: slices >= ${GOAL_RATIO}x flexible's decisions/s at every concurrency and <= ${GOAL_CALLS_PER_1000} Redis calls per 1,000 decisions: ${met ? 'MET' : 'NOT MET'}\n`,
  );
  if (failed) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
