// `make bench`: Envoy's ShouldRateLimit against Allow on the same service process
// and the same Redis, in one run: the maximum decisions per second of each
// (closed loop), then p50/p99 of each at half its own maximum (open loop: calls
// sent on a fixed schedule, as a proxy's traffic arrives, latency measured
// from each call's scheduled time). Envoy's default timeout for this call is
// 20 ms; p99 at half load has to stay far below it.
//
//   npx tsx bench/rls-run.ts [--seconds 4] [--concurrency 48] [--rounds 3] [--warmup 2]
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { startRedisServer } from '../test/support/redis-server.js';
import { rlsClient } from '../test/support/rls-client.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { startServerChild } from './children.js';
import { allowCaller } from './client.js';
import { type Call, driveLoad } from './load.js';
import { parseOptions } from './options.js';
import { benchBudgetMs } from './rounds.js';
import { median, percentile } from './stats.js';

const USERS = 10_000;

/** ShouldRateLimit for domain `bench`, one descriptor (user, <id>), cycling over USERS values as the Allow caller does. */
function rlsCaller(port: number): { call: Call; close(): void } {
  const client = rlsClient(`127.0.0.1:${port}`);
  const requests = Array.from({ length: USERS }, (_, i) => ({ domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: `bench-user-${i}` }] }] }));
  let next = 0;
  return {
    async call() {
      const request = requests[next]!;
      next = (next + 1) % USERS;
      return (await client.shouldRateLimit(request)).overall_code === 'OK';
    },
    close: () => client.close(),
  };
}

/** Open loop: `rate` calls per second for `seconds`, each timed from when it was due; p50/p99 in ms and the errors. */
async function openLoop(call: Call, rate: number, seconds: number): Promise<{ p50: number; p99: number; sent: number; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const total = Math.round(rate * seconds);
  const inFlight: Promise<void>[] = [];
  const signal = new AbortController().signal;
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    // Sleep only when more than a timer's grain ahead; otherwise send now (the late time counts as latency).
    if (wait > 2) await new Promise((resolve) => setTimeout(resolve, wait));
    inFlight.push(
      call(signal).then(
        () => void latencies.push(performance.now() - due),
        () => void errors++,
      ),
    );
  }
  await Promise.all(inFlight);
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), sent: total, errors };
}

async function main(run: BenchRun): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  run.watchdog(benchBudgetMs(options, 4));
  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const callers = { Allow: allowCaller(service.port), ShouldRateLimit: rlsCaller(service.port) };
  run.onCleanup(() => Object.values(callers).forEach((c) => c.close()));
  process.stdout.write(
    `ShouldRateLimit vs Allow: one service process, Redis ${redis.url}, one descriptor / one token bucket limit per call, ${USERS} values\n` +
      `max: closed loop, concurrency ${options.concurrency}, ${options.rounds} alternating rounds x ${options.seconds} s; ` +
      `then an open loop at half of each one's max for ${options.seconds} s; node ${process.version}, ${cpus().length} cpus\n\n`,
  );
  const kinds = ['Allow', 'ShouldRateLimit'] as const;
  for (const kind of kinds) {
    await driveLoad({ call: callers[kind].call, concurrency: options.concurrency, durationMs: options.warmupSeconds * 1000, graceMs: 5_000 });
  }
  const rates: Record<(typeof kinds)[number], number[]> = { Allow: [], ShouldRateLimit: [] };
  const closedErrors: Record<(typeof kinds)[number], number> = { Allow: 0, ShouldRateLimit: 0 };
  let failed = 0;
  for (let round = 0; round < options.rounds; round++) {
    for (const kind of kinds) {
      const result = await driveLoad({ call: callers[kind].call, concurrency: options.concurrency, durationMs: options.seconds * 1000, graceMs: 5_000 });
      rates[kind].push(result.decisionsPerSecond);
      closedErrors[kind] += result.errors;
      failed += result.errors;
      if (result.firstError !== undefined) process.stderr.write(`${kind}: ${result.errors} failed calls, the first: ${result.firstError}\n`);
    }
  }
  const rows: string[] = ['| call | max decisions/s | rate for latency | p50 ms | p99 ms | errors (max, latency) |', '|---|---:|---:|---:|---:|---:|'];
  for (const kind of kinds) {
    const max = median(rates[kind]);
    const half = Math.max(1, Math.floor(max / 2));
    const latency = await openLoop(callers[kind].call, half, options.seconds);
    failed += latency.errors;
    rows.push(`| ${kind} | ${max.toFixed(0)} | ${half}/s | ${latency.p50.toFixed(2)} | ${latency.p99.toFixed(2)} | ${closedErrors[kind]}, ${latency.errors} |`);
  }
  process.stdout.write(`${rows.join('\n')}\n\nShouldRateLimit / Allow max: ${(median(rates.ShouldRateLimit) / median(rates.Allow)).toFixed(2)}\n`);
  if (failed > 0) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
