// `make bench-cluster`: the quota service on a 3-master Redis Cluster vs on one
// Redis node, same load, same run, rounds alternating, so the figures compare
// whatever the (shared) machine is doing. Results go to docs/benchmarks.md.
//
//   npx tsx bench/cluster.ts [--seconds 4] [--concurrency 48] [--rounds 3] [--warmup 2]
import { cpus } from 'node:os';
import { startRedisCluster } from '../test/support/redis-cluster.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild, type ServerChild } from './children.js';
import { allowCaller } from './client.js';
import { driveLoad, type LoadResult } from './load.js';
import { parseOptions } from './options.js';
import { median } from './stats.js';

const ROUND_GRACE_MS = 5_000;
type Store = 'single' | 'cluster';

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const stops: Array<() => Promise<void>> = [];
  const watchdog = setTimeout(() => {
    process.stderr.write('bench: overran its time budget\n');
    process.exit(1);
  }, 120_000 + options.rounds * 2 * (options.seconds * 1000 + ROUND_GRACE_MS));
  try {
    const redis = await startRedisServer();
    stops.push(() => redis.stop());
    const cluster = await startRedisCluster();
    stops.push(() => cluster.stop());
    const children: Record<Store, ServerChild> = {
      single: await startServerChild('single', 'quota-server.ts', [redis.url]),
      cluster: await startServerChild('cluster', 'quota-server.ts', ['--cluster', cluster.seeds.join(',')]),
    };
    stops.push(() => children.single.stop(), () => children.cluster.stop());
    const callers = { single: allowCaller(children.single.port), cluster: allowCaller(children.cluster.port) };
    stops.push(async () => Object.values(callers).forEach((c) => c.close()));

    process.stdout.write(
      `Unary Allow (token bucket, 10,000 users): quota service on one Redis node vs on a 3-master/3-replica cluster\n` +
        `cluster started in ${cluster.startupMs} ms; concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per store, ` +
        `warm-up ${options.warmupSeconds} s; node ${process.version}, ${cpus().length} cpus\n\n`,
    );
    const stores: Store[] = ['single', 'cluster'];
    for (const store of stores) {
      await driveLoad({ call: callers[store].call, concurrency: options.concurrency, durationMs: options.warmupSeconds * 1000, graceMs: ROUND_GRACE_MS });
    }
    const results: Record<Store, LoadResult[]> = { single: [], cluster: [] };
    for (let round = 1; round <= options.rounds; round++) {
      for (const store of stores) {
        const r = await driveLoad({ call: callers[store].call, concurrency: options.concurrency, durationMs: options.seconds * 1000, graceMs: ROUND_GRACE_MS });
        results[store].push(r);
        process.stdout.write(`round ${round} ${store.padEnd(7)} ${r.decisionsPerSecond.toFixed(0)} decisions/s, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, errors ${r.errors}\n`);
      }
    }
    process.stdout.write('\n| store | decisions/s | p50 (ms) | p95 (ms) | p99 (ms) | errors |\n|---|---:|---:|---:|---:|---:|\n');
    for (const store of stores) {
      const m = (pick: (r: LoadResult) => number) => median(results[store].map(pick));
      const errors = results[store].reduce((sum, r) => sum + r.errors, 0);
      process.stdout.write(`| ${store} | ${m((r) => r.decisionsPerSecond).toFixed(0)} | ${m((r) => r.p50Ms).toFixed(2)} | ${m((r) => r.p95Ms).toFixed(2)} | ${m((r) => r.p99Ms).toFixed(2)} | ${errors} |\n`);
    }
    const shards = (await cluster.topology()).shards;
    const perShard = await Promise.all(shards.map((s) => cluster.node(s.masterPort).dbsize()));
    process.stdout.write(`\nkeys: single node ${await redis.client().dbsize()}; cluster masters ${perShard.join(' / ')}\n`);
    const failed = stores.some((store) => results[store].some((r) => r.errors > 0));
    if (failed) process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return failed ? 1 : 0;
  } finally {
    clearTimeout(watchdog);
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
