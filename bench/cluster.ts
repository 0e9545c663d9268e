// `make bench-cluster`: the quota service on a 3-master Redis Cluster vs on one
// Redis node, as an outside caller sees it (the cluster without replicas, as the
// one node has none, and, for reference, with a replica per master): AllowBatch of 100 requests, 8 in
// flight, 10,000 users in 100 tenants, same run, rounds alternating in ABBA order
// (odd rounds one node first, even rounds the cluster first), so the figures
// compare whatever the (shared) machine is doing.
//
//   npx tsx bench/cluster.ts [--seconds 4] [--concurrency 8] [--rounds 6] [--warmup 2]
//
// Two policies: `bench`, one token bucket per user, and `bench-tenant`, the
// user's bucket and a per-minute window per tenant (two slots on a cluster, so
// a reservation and a second phase). The ratio cluster / one node is the median
// of the per-round ratios (each round runs both stores back to back).
import { cpus, loadavg } from 'node:os';
import { startRedisCluster } from '../test/support/redis-cluster.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { allowBatchCaller, type AllowBatchCaller } from './allow-batch-caller.js';
import { scriptCalls } from '../test/support/script-calls.js';
import { redisCpuMs, sampleCpu } from './cpu.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { CLUSTER_TARGETS, JUDGED_STORE } from './cluster-targets.js';
import { writeBenchOut } from './bench-out.js';
import { startServerChild, type ServerChild } from './children.js';
import { driveLoad, type LoadResult } from './load.js';
import { parseOptions } from './options.js';
import { benchBudgetMs, ROUND_GRACE_MS } from './rounds.js';
import { median } from './stats.js';

const BATCH = 100;
/**
 * A round's load, the CPU it cost per decision (µs: the service process, and
 * Redis, every master) and the script calls Redis ran per 100 decisions.
 */
type Measured = LoadResult & { serviceUs: number; redisUs: number; callsPer100: number };
type Store = 'single' | 'cluster' | 'cluster-replicated';
type Policy = 'bench' | 'bench-tenant';
const POLICIES: readonly Policy[] = ['bench', 'bench-tenant'];
const STORES: readonly Store[] = ['single', 'cluster', 'cluster-replicated'];
/** How the report (bench/doc/) names each policy. */
const POLICY_LABELS: Record<Policy, string> = { bench: 'one limit (user)', 'bench-tenant': 'user + tenant (two slots)' };
/** What the cluster should reach, as a share of one node, per policy (bench/cluster-targets.ts). */
const TARGET = (policy: Policy): number => CLUSTER_TARGETS[POLICY_LABELS[policy]]!;
const DESCRIBED: Record<Policy, string> = {
  bench: 'one token bucket per user',
  'bench-tenant': 'user bucket + per-minute window per tenant (two slots)',
};

async function main(run: BenchRun): Promise<number> {
  const argv = process.argv.slice(2);
  // Batches carry the concurrency: 8 AllowBatch calls of 100 in flight unless told otherwise;
  // 6 rounds (three ABBA pairs) unless told otherwise.
  const defaults = [
    ...(argv.some((a) => a.startsWith('--concurrency')) ? [] : ['--concurrency', '8']),
    ...(argv.some((a) => a.startsWith('--rounds')) ? [] : ['--rounds', '6']),
  ];
  const options = parseOptions([...argv, ...defaults]);
  run.watchdog(benchBudgetMs(options, POLICIES.length * STORES.length, 120_000));
  const load = [loadavg()[0]!];

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  // No replicas, as the one node has none: on a small machine a replica's CPU is taken from
  // everything else. The replicated cluster is measured beside it, for reference.
  const cluster = await startRedisCluster({ replicas: false });
  run.onCleanup(() => cluster.stop());
  const replicated = await startRedisCluster();
  run.onCleanup(() => replicated.stop());
  const children: Record<Store, ServerChild> = {
    single: await startServerChild('single', 'quota-server.ts', [redis.url], { cpuProfDir: options.cpuProfDir }),
    cluster: await startServerChild('cluster', 'quota-server.ts', ['--cluster', cluster.seeds.join(',')], { cpuProfDir: options.cpuProfDir }),
    'cluster-replicated': await startServerChild('cluster-replicated', 'quota-server.ts', ['--cluster', replicated.seeds.join(',')]),
  };
  for (const child of Object.values(children)) run.onCleanup(() => child.stop());
  const kinds = POLICIES.flatMap((policy) => STORES.map((store) => ({ store, policy, name: `${store} ${policy}` })));
  const callers = new Map<string, AllowBatchCaller>(kinds.map((k) => [k.name, allowBatchCaller(children[k.store].port, k.policy, BATCH)]));
  run.onCleanup(() => callers.forEach((c) => c.close()));

  process.stdout.write(
    `AllowBatch of ${BATCH}, ${options.concurrency} in flight, 10,000 users in 100 tenants: the quota service on one Redis node ` +
      `vs on a 3-master cluster without replicas (started in ${cluster.startupMs} ms) and, for reference, one with a replica per master, rounds alternating in ABBA order (even rounds the other way round)\n` +
      POLICIES.map((p) => `policy ${p} = ${DESCRIBED[p]}\n`).join('') +
      `${options.rounds} rounds x ${options.seconds} s per kind, warm-up ${options.warmupSeconds} s; node ${process.version}, ` +
      `${cpus().length} cpus (${cpus()[0]?.model ?? 'unknown'}), load average ${load[0]!.toFixed(2)} at start\n\n`,
  );
  const drive = (name: string, seconds: number) =>
    driveLoad({ call: callers.get(name)!.call, concurrency: options.concurrency, durationMs: seconds * 1000, graceMs: ROUND_GRACE_MS });
  if (options.warmupSeconds > 0) for (const { name } of kinds) await drive(name, options.warmupSeconds);
  // CPU per decision (the service's, and Redis's: the masters' on a cluster) holds up on a busy
  // machine where throughput does not: it says whether the cluster path costs more per decision.
  const mastersOf = async (c: typeof cluster) => (await c.topology()).shards.map((s) => c.node(s.masterPort));
  const masters = { cluster: await mastersOf(cluster), replicated: await mastersOf(replicated) };
  const sumCpu = async (nodes: typeof masters.cluster) => (await Promise.all(nodes.map(redisCpuMs))).reduce((a, b) => a + b, 0);
  const sumCalls = async (nodes: typeof masters.cluster) => (await Promise.all(nodes.map(scriptCalls))).reduce((a, b) => a + b, 0);
  const nodesOf: Record<Store, typeof masters.cluster> = { single: [redis.client()], cluster: masters.cluster, 'cluster-replicated': masters.replicated };
  const cpu = async (store: Store) => ({
    serviceMs: (await sampleCpu(children[store].pid, undefined)).serverMs,
    redisMs: await sumCpu(nodesOf[store]),
    calls: await sumCalls(nodesOf[store]),
  });
  const results = new Map<string, Measured[]>(kinds.map((k) => [k.name, []]));
  // ABBA: odd rounds in order (one node first), even rounds reversed (the clusters first), so
  // neither store always runs right after the other, or always first after a pause.
  const reversed = [...kinds].reverse();
  for (let round = 1; round <= options.rounds; round++) {
    for (const { name, store } of round % 2 === 1 ? kinds : reversed) {
      const before = await cpu(store);
      const r = await drive(name, options.seconds);
      const after = await cpu(store);
      const decisions = r.calls * BATCH;
      const m: Measured = {
        ...r,
        serviceUs: ((after.serviceMs - before.serviceMs) * 1000) / decisions,
        redisUs: ((after.redisMs - before.redisMs) * 1000) / decisions,
        callsPer100: ((after.calls - before.calls) * 100) / decisions,
      };
      results.get(name)!.push(m);
      process.stdout.write(
        `round ${round} ${name.padEnd(20)} ${(r.decisionsPerSecond * BATCH).toFixed(0)} decisions/s, ` +
          `batch p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, CPU per decision: service ${m.serviceUs.toFixed(1)} µs, ` +
          `redis ${m.redisUs.toFixed(1)} µs, script calls per 100 decisions ${m.callsPer100.toFixed(1)}, errors ${r.errors}${r.firstError ? ` (${r.firstError})` : ''}\n`,
      );
    }
  }
  load.push(loadavg()[0]!);

  process.stdout.write(
    '\n| store | policy | decisions/s | batch p50 (ms) | batch p99 (ms) | service CPU µs/decision | Redis CPU µs/decision | script calls / 100 decisions | errors |\n' +
      '|---|---|---:|---:|---:|---:|---:|---:|---:|\n',
  );
  for (const { store, policy, name } of kinds) {
    const rs = results.get(name)!;
    const m = (pick: (r: Measured) => number) => median(rs.map(pick));
    const errors = rs.reduce((sum, r) => sum + r.errors, 0);
    process.stdout.write(
      `| ${store} | ${policy} | ${(m((r) => r.decisionsPerSecond) * BATCH).toFixed(0)} | ${m((r) => r.p50Ms).toFixed(2)} | ${m((r) => r.p99Ms).toFixed(2)} | ` +
        `${m((r) => r.serviceUs).toFixed(1)} | ${m((r) => r.redisUs).toFixed(1)} | ${m((r) => r.callsPer100).toFixed(1)} | ${errors} |\n`,
    );
  }
  process.stdout.write('\n');
  for (const policy of POLICIES) {
    const single = results.get(`single ${policy}`)!;
    for (const store of ['cluster', 'cluster-replicated'] as const) {
      const ratios = results.get(`${store} ${policy}`)!.map((r, i) => r.decisionsPerSecond / single[i]!.decisionsPerSecond);
      const ratio = median(ratios);
      const judged = store === JUDGED_STORE ? `target ${TARGET(policy)}: ${ratio >= TARGET(policy) ? 'met' : 'NOT met'}` : 'for reference';
      process.stdout.write(
        `${store} / one node, ${policy} (${DESCRIBED[policy]}): ${ratio.toFixed(2)} (median of rounds ${ratios.map((r) => r.toFixed(2)).join(', ')}; ${judged})\n`,
      );
    }
  }
  // Every round of every kind, in decisions/s (a batch is BATCH decisions), for the report's plots and ratios (bench/doc/).
  writeBenchOut({
    rows: kinds.flatMap(({ store, policy, name }) =>
      results.get(name)!.map((r, i) => ({
        store,
        policy: POLICY_LABELS[policy],
        round: i + 1,
        decisionsPerSecond: r.decisionsPerSecond * BATCH,
        p50Ms: r.p50Ms,
        p95Ms: r.p95Ms,
        p99Ms: r.p99Ms,
        errors: r.errors,
        serviceUs: r.serviceUs,
        redisUs: r.redisUs,
        callsPer100: r.callsPer100,
      })),
    ),
  });
  const perShard = await Promise.all(masters.cluster.map((node) => node.dbsize()));
  process.stdout.write(
    `\nkeys: single node ${await redis.client().dbsize()}; cluster masters ${perShard.join(' / ')}\n` +
      `load average ${load.map((l) => l.toFixed(2)).join(' at start, ')} at the end: the machine is shared, so compare the ratios, not the absolute figures\n`,
  );
  const failed = [...results.values()].some((rs) => rs.some((r) => r.errors > 0));
  if (failed) process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
  return failed ? 1 : 0;
}

benchMain(main);
