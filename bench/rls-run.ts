// `make bench`: Envoy's ShouldRateLimit against Allow on the same service process
// and the same Redis, in one run: the maximum decisions per second of each
// (closed loop: h2load on one connection, as a proxy keeps one, with 32 calls
// in flight, a client in C that saturates the service before itself; beside it
// a lean Node client at 8 in flight that reads every call's status), then
// p50/p99 of each at half its own maximum (open loop: calls sent on a fixed
// schedule, each at its own time, as a proxy's traffic arrives; by h2pace,
// bench/tools/h2pace.c, when it builds here), rounds alternating. Envoy's default timeout
// for this call is 20 ms; p99 at half load has to stay far below it. Every
// call of both kinds carries that deadline, as Envoy sends it: the store budget
// is what is left of it. A call that outlives it (answered DEADLINE_EXCEEDED,
// or UNAVAILABLE by the failure mode once the budget is spent) is what Envoy
// would see as a timeout: counted apart, neither a decision nor an error.
//
//   npx tsx bench/rls-run.ts [--seconds 4] [--concurrency 8] [--rounds 3] [--warmup 2]
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../test/support/redis-server.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { startServerChild } from './children.js';
import { type Call, driveLoad } from './load.js';
import { parseOptions } from './options.js';
import { rawUnaryCaller } from './raw-unary.js';
import { grpcFrame, h2loadAvailable, h2loadClosedLoop, h2loadOpenLoop } from './h2load.js';
import { buildH2pace, h2paceOpenLoop } from './h2pace.js';
import { benchBudgetMs } from './rounds.js';
import { median, percentile } from './stats.js';
import { UNARY_PATHS, type UnaryMethod, unaryRequestOf } from './unary-requests.js';

const USERS = 10_000;
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Envoy's default timeout for a rate limit call (20 ms), as Envoy sends its deadline; the same for both kinds. */
const DEADLINE_HEADERS = { 'grpc-timeout': '20m' };
const DEADLINE_HEADER_LINES = Object.entries(DEADLINE_HEADERS).map(([name, value]) => `${name}: ${value}`);

/** h2load's closed loop for the maximum: one connection, and enough calls in flight on it that the service, not the client, is what saturates. */
const H2LOAD_MAX = { clients: 1, streams: 32 } as const;

/** The answers of a call that outlived that deadline: DEADLINE_EXCEEDED, or the failure mode's UNAVAILABLE once the store budget is spent. */
const TIMED_OUT = new Set(['grpc-status 4', 'grpc-status 14']);

/**
 * One lean caller per kind (raw-unary.ts), cycling over USERS values
 * (unary-requests.ts: the same token bucket behind each); a call that outlived
 * its deadline is counted in `timedOut` before it fails like any other error.
 */
function callers(port: number, timedOut: Record<UnaryMethod, number>): Record<UnaryMethod, { call: Call; close(): void }> {
  const users = Array.from({ length: USERS }, (_, i) => `bench-user-${i}`);
  const caller = (kind: UnaryMethod) => {
    const raw = rawUnaryCaller(
      port,
      UNARY_PATHS[kind],
      users.map((user): Uint8Array => unaryRequestOf[kind](user)),
      DEADLINE_HEADERS,
    );
    const call: Call = (signal) =>
      raw.call(signal).catch((error: unknown) => {
        if (error instanceof Error && TIMED_OUT.has(error.message)) timedOut[kind]++;
        throw error;
      });
    return { call, close: raw.close };
  };
  return { Allow: caller('Allow'), ShouldRateLimit: caller('ShouldRateLimit') };
}

/**
 * Open loop: `rate` calls per second for `seconds`, each sent when it is due
 * (never before: each millisecond tick sends the calls due by then) and timed
 * from when it was due, so a stall of the service or of this process counts in
 * full; p50/p99 in ms and the errors. Nothing per call is kept but its latency,
 * in an array made up front: this process's own garbage collection pauses
 * would otherwise show as the service's latency.
 */
async function openLoop(call: Call, rate: number, seconds: number): Promise<{ p50: number; p99: number; sent: number; errors: number }> {
  const total = Math.round(rate * seconds);
  const latencies = new Float64Array(total);
  let answered = 0;
  let errors = 0;
  let pending = 0;
  let drained: (() => void) | undefined;
  const start = performance.now();
  const signal = new AbortController().signal;
  const send = (index: number, due: number) => {
    pending++;
    call(signal).then(
      () => {
        latencies[answered++] = performance.now() - due;
        if (--pending === 0) drained?.();
      },
      () => {
        errors++;
        if (--pending === 0) drained?.();
      },
    );
    return index;
  };
  let next = 0;
  while (next < total) {
    const now = performance.now();
    for (; next < total; next++) {
      const due = start + (next * 1000) / rate;
      if (due > now) break;
      send(next, due);
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  if (pending > 0) await new Promise<void>((resolve) => (drained = resolve));
  const sorted = Array.from(latencies.subarray(0, answered)).sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), sent: total, errors };
}

async function main(run: BenchRun): Promise<number> {
  const argv = process.argv.slice(2);
  // 8 calls in flight keep the service busy; many more only queue, and a call that waits in
  // the queue past its 20 ms deadline is what Envoy would time out, not a decision.
  const options = parseOptions(argv.some((a) => a.startsWith('--concurrency')) ? argv : [...argv, '--concurrency', '8']);
  run.watchdog(benchBudgetMs(options, 6));
  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const timedOut: Record<UnaryMethod, number> = { Allow: 0, ShouldRateLimit: 0 };
  const callersOf = callers(service.port, timedOut);
  run.onCleanup(() => Object.values(callersOf).forEach((c) => c.close()));
  // h2load when installed (make bench installs it): a client whose own cost and pauses do not set the figures.
  const withH2load = h2loadAvailable();
  process.stdout.write(
    `ShouldRateLimit vs Allow: one service process, Redis ${redis.url}, one descriptor / one token bucket limit per call, ${USERS} values\n` +
      (withH2load
        ? `max: closed loop by h2load, ${H2LOAD_MAX.clients} connection, ${H2LOAD_MAX.streams} calls in flight, one descriptor value; beside it the Node client's closed loop, concurrency ${options.concurrency}, which reads every call's status; `
        : `max: closed loop by the Node client (h2load not found), concurrency ${options.concurrency}; `) +
      `${options.rounds} alternating rounds x ${options.seconds} s; ` +
      `then an open loop at half of each one's max, ${options.rounds} alternating rounds x ${options.seconds} s; node ${process.version}, ${cpus().length} cpus\n\n`,
  );
  const kinds = ['Allow', 'ShouldRateLimit'] as const;
  for (const kind of kinds) {
    await driveLoad({ call: callersOf[kind].call, concurrency: options.concurrency, durationMs: options.warmupSeconds * 1000, graceMs: 5_000 });
  }
  timedOut.Allow = timedOut.ShouldRateLimit = 0;
  const nodeRates: Record<UnaryMethod, number[]> = { Allow: [], ShouldRateLimit: [] };
  const h2loadRates: Record<UnaryMethod, number[]> = { Allow: [], ShouldRateLimit: [] };
  const closedErrors: Record<UnaryMethod, number> = { Allow: 0, ShouldRateLimit: 0 };
  let failed = 0;
  for (let round = 0; round < options.rounds; round++) {
    for (const kind of kinds) {
      const timedOutBefore = timedOut[kind];
      const result = await driveLoad({ call: callersOf[kind].call, concurrency: options.concurrency, durationMs: options.seconds * 1000, graceMs: 5_000 });
      nodeRates[kind].push(result.decisionsPerSecond);
      if (withH2load) {
        const url = `http://127.0.0.1:${service.port}${UNARY_PATHS[kind]}`;
        const loaded = await h2loadClosedLoop(url, grpcFrame(unaryRequestOf[kind]('bench-user-0')), {
          ...H2LOAD_MAX,
          seconds: options.seconds,
          headers: DEADLINE_HEADER_LINES,
        });
        h2loadRates[kind].push(loaded.succeeded / options.seconds);
        failed += loaded.failed;
      }
      // A call past its deadline is what Envoy would have timed out: counted apart, never as a decision.
      const errors = result.errors - (timedOut[kind] - timedOutBefore);
      closedErrors[kind] += errors;
      failed += errors;
      if (errors > 0) process.stderr.write(`${kind}: ${errors} failed calls, the first: ${result.firstError}\n`);
    }
  }
  const timedOutAtMax = { ...timedOut };
  const rates = withH2load ? h2loadRates : nodeRates;
  // Latency at half of each one's max, rounds alternating: a stall of this shared machine lands in one
  // round of one kind, so the report gives the median over the rounds and the worst round beside it.
  // The same open loop against a no-op server of the same gRPC stack, at the same rate: what
  // the client, the network and this machine's wake-ups cost before any decision.
  // The open loop: h2pace when it builds here (each call at its own time), else h2load (in bursts), else the Node client.
  const pacer = await buildH2pace(REPO_ROOT);
  const noop = pacer !== undefined || withH2load ? await startServerChild('noop', 'noop-server.ts', []) : undefined;
  if (noop !== undefined) run.onCleanup(() => noop.stop());
  type Latency = { p50: number; p99: number; errors: number; timedOut: number | undefined; lateP99Ms?: number };
  const openLoopAt = async (port: number, kind: UnaryMethod, rate: number): Promise<Latency> => {
    const frame = grpcFrame(unaryRequestOf[kind]('bench-user-0'));
    if (pacer !== undefined) return h2paceOpenLoop(pacer, port, UNARY_PATHS[kind], frame, rate, options.seconds, DEADLINE_HEADER_LINES);
    // h2load reads HTTP, not gRPC statuses: a call past its deadline is not told apart.
    return { ...(await h2loadOpenLoop(port, UNARY_PATHS[kind], frame, rate, options.seconds, DEADLINE_HEADER_LINES)), timedOut: undefined };
  };
  const half = (kind: UnaryMethod) => Math.max(1, Math.floor(median(rates[kind]) / 2));
  const latencies: Record<UnaryMethod, Latency[]> = { Allow: [], ShouldRateLimit: [] };
  const noopLatencies: Record<UnaryMethod, Latency[]> = { Allow: [], ShouldRateLimit: [] };
  for (let round = 0; round < options.rounds; round++) {
    for (const kind of kinds) {
      let latency: Latency;
      if (noop !== undefined) {
        latency = await openLoopAt(service.port, kind, half(kind));
        noopLatencies[kind].push(await openLoopAt(noop.port, kind, half(kind)));
      } else {
        const timedOutBefore = timedOut[kind];
        const sent = await openLoop(callersOf[kind].call, half(kind), options.seconds);
        const late = timedOut[kind] - timedOutBefore;
        latency = { ...sent, errors: sent.errors - late, timedOut: late };
      }
      latencies[kind].push(latency);
      failed += latency.errors;
    }
  }
  const lateP99Ms = Math.max(0, ...Object.values(latencies).flatMap((rounds) => rounds.map((r) => r.lateP99Ms ?? 0)));
  process.stdout.write(
    pacer !== undefined
      ? `latency: h2pace (bench/tools/h2pace.c), one connection, each call sent at its own time (its sends late by ${lateP99Ms.toFixed(2)} ms at p99), one descriptor value; no-op = the same calls at the same rate to a no-op server of the same gRPC stack\n\n`
      : withH2load
        ? "latency: h2load, one connection, one descriptor value (h2load's rate mode sends the calls due every 10 ms at once); no-op = the same calls at the same rate to a no-op server of the same gRPC stack\n\n"
        : 'latency: the Node client (h2load not found): its own garbage collection pauses count as latency\n\n',
  );
  const nodeColumn = `Node client at ${options.concurrency} in flight`;
  const rows: string[] = [
    `| call | max decisions/s | ${nodeColumn} | rate for latency | p50 ms | p99 ms (median of rounds) | p99 ms (worst round) | no-op p50 / p99 ms, same rate | past the 20 ms deadline (${nodeColumn}) | past the 20 ms deadline (latency) | errors (max, latency) |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const kind of kinds) {
    const rounds = latencies[kind];
    const p50 = median(rounds.map((r) => r.p50));
    const p99 = median(rounds.map((r) => r.p99));
    const worst = Math.max(...rounds.map((r) => r.p99));
    const errors = rounds.reduce((sum, r) => sum + r.errors, 0);
    const late = rounds.some((r) => r.timedOut === undefined) ? 'n/a' : String(rounds.reduce((sum, r) => sum + (r.timedOut ?? 0), 0));
    const floor = noopLatencies[kind];
    const noopCell = floor.length === 0 ? 'n/a' : `${median(floor.map((r) => r.p50)).toFixed(2)} / ${median(floor.map((r) => r.p99)).toFixed(2)}`;
    rows.push(
      `| ${kind} | ${median(rates[kind]).toFixed(0)} | ${median(nodeRates[kind]).toFixed(0)} | ${half(kind)}/s | ${p50.toFixed(2)} | ${p99.toFixed(2)} | ${worst.toFixed(2)} | ${noopCell} | ${timedOutAtMax[kind]} | ${late} | ${closedErrors[kind]}, ${errors} |`,
    );
  }
  process.stdout.write(`${rows.join('\n')}\n\nShouldRateLimit / Allow max: ${(median(rates.ShouldRateLimit) / median(rates.Allow)).toFixed(2)}\n`);
  if (failed > 0) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
