// `make bench-cluster`: the quota service on a 3-master Redis Cluster vs on one
// Redis node, same load, same run, rounds alternating, so the figures compare
// whatever the (shared) machine is doing. Results go to docs/benchmarks.md.
//
//   npx tsx bench/cluster.ts [--seconds 4] [--concurrency 48] [--rounds 3] [--warmup 2]
import { cpus } from 'node:os';
import { startRedisCluster } from '../test/support/redis-cluster.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild, type ServerChild } from './children.js';
import { writeBenchOut } from './bench-out.js';
import { allowCaller } from './client.js';
import { driveLoad, type LoadResult } from './load.js';
import { parseOptions } from './options.js';
import { median } from './stats.js';

const ROUND_GRACE_MS = 5_000;
type Store = 'single' | 'cluster';
type Policy = 'bench' | 'bench-multi';
/** The load kinds of one round: each store with the one-limit and the three-limit policy. */
const KINDS = [
  ['single', 'bench'],
  ['cluster', 'bench'],
  ['single', 'bench-multi'],
  ['cluster', 'bench-multi'],
] as const satisfies ReadonlyArray<readonly [Store, Policy]>;
type Kind = `${Store} ${Policy}`;
/** How the report (bench/doc/) names each policy. */
const POLICY_LABELS: Record<Policy, string> = { bench: 'one limit (user)', 'bench-multi': 'user + tenant (two slots)' };

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const stops: Array<() => Promise<void>> = [];
  const watchdog = setTimeout(
    () => {
      process.stderr.write('bench: overran its time budget\n');
      process.exit(1);
    },
    120_000 + options.rounds * KINDS.length * (options.seconds * 1000 + ROUND_GRACE_MS),
  );
  try {
    const redis = await startRedisServer();
    stops.push(() => redis.stop());
    const cluster = await startRedisCluster();
    stops.push(() => cluster.stop());
    const children: Record<Store, ServerChild> = {
      single: await startServerChild('single', 'quota-server.ts', [redis.url]),
      cluster: await startServerChild('cluster', 'quota-server.ts', ['--cluster', cluster.seeds.join(',')]),
    };
    stops.push(
      () => children.single.stop(),
      () => children.cluster.stop(),
    );
    const callers = Object.fromEntries(KINDS.map(([store, policy]) => [`${store} ${policy}`, allowCaller(children[store].port, policy)])) as Record<
      Kind,
      ReturnType<typeof allowCaller>
    >;
    stops.push(async () => Object.values(callers).forEach((c) => c.close()));

    process.stdout.write(
      `Unary Allow, 10,000 users in 100 tenants: quota service on one Redis node vs on a 3-master/3-replica cluster;\n` +
        `policy bench = one token bucket per user; bench-multi = bucket + per-minute window per user + per-minute window per tenant (two slots on the cluster)\n` +
        `cluster started in ${cluster.startupMs} ms; concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per store, ` +
        `warm-up ${options.warmupSeconds} s; node ${process.version}, ${cpus().length} cpus\n\n`,
    );
    const kinds = KINDS.map(([store, policy]) => `${store} ${policy}` as Kind);
    for (const kind of kinds) {
      await driveLoad({ call: callers[kind].call, concurrency: options.concurrency, durationMs: options.warmupSeconds * 1000, graceMs: ROUND_GRACE_MS });
    }
    const results = Object.fromEntries(kinds.map((kind) => [kind, [] as LoadResult[]])) as Record<Kind, LoadResult[]>;
    for (let round = 1; round <= options.rounds; round++) {
      for (const kind of kinds) {
        const r = await driveLoad({ call: callers[kind].call, concurrency: options.concurrency, durationMs: options.seconds * 1000, graceMs: ROUND_GRACE_MS });
        results[kind].push(r);
        process.stdout.write(
          `round ${round} ${kind.padEnd(19)} ${r.decisionsPerSecond.toFixed(0)} decisions/s, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, errors ${r.errors}\n`,
        );
      }
    }
    process.stdout.write('\n| store | policy | decisions/s | p50 (ms) | p95 (ms) | p99 (ms) | errors |\n|---|---|---:|---:|---:|---:|---:|\n');
    for (const kind of kinds) {
      const m = (pick: (r: LoadResult) => number) => median(results[kind].map(pick));
      const errors = results[kind].reduce((sum, r) => sum + r.errors, 0);
      const [store, policy] = kind.split(' ');
      process.stdout.write(
        `| ${store} | ${policy} | ${m((r) => r.decisionsPerSecond).toFixed(0)} | ${m((r) => r.p50Ms).toFixed(2)} | ${m((r) => r.p95Ms).toFixed(2)} | ${m((r) => r.p99Ms).toFixed(2)} | ${errors} |\n`,
      );
    }
    // Every round of every kind, for the report's plots and ratios (bench/doc/).
    writeBenchOut({
      rows: kinds.flatMap((kind) => {
        const [store, policy] = kind.split(' ') as [Store, Policy];
        return results[kind].map((r, i) => ({ store, policy: POLICY_LABELS[policy], round: i + 1, ...pick(r) }));
      }),
    });
    const shards = (await cluster.topology()).shards;
    const perShard = await Promise.all(shards.map((s) => cluster.node(s.masterPort).dbsize()));
    process.stdout.write(`\nkeys: single node ${await redis.client().dbsize()}; cluster masters ${perShard.join(' / ')}\n`);
    const failed = kinds.some((kind) => results[kind].some((r) => r.errors > 0));
    if (failed) process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return failed ? 1 : 0;
  } finally {
    clearTimeout(watchdog);
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

function pick(r: LoadResult) {
  return { decisionsPerSecond: r.decisionsPerSecond, p50Ms: r.p50Ms, p95Ms: r.p95Ms, p99Ms: r.p99Ms, errors: r.errors };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
