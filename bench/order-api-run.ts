// `make bench`, third part: latency of POST /api/orders through the reference
// order API with the limiter (quota client -> quota service -> Redis) vs the
// same API whose limiter allows without asking, same run, alternating rounds.
// One request in flight by default, so latency is measured below saturation.
//
//   npx tsx bench/order-api-run.ts [--seconds 4] [--concurrency 1] [--rounds 3] [--warmup 6] [--cpu-prof DIR] [--hop] [--calls] [--unbatched]
//
// --cpu-prof DIR: CPU profiles of the order API processes. --hop: one more
// kind, "raw", a bare Allow from this process to the same quota service (no
// HTTP, no quota client), so one run shows how much of what the limiter adds
// is the gRPC hop to the service and its Redis decision itself. --calls: one
// more kind, "calls", the order API whose quota client sends each batch as its
// own AllowBatch (or Allow) call instead of a message on one AllowStream.
// --unbatched: one more kind, "unary", the order API whose quota client does not batch.
import { benchMain, type BenchRun } from './bench-main.js';
import { alternateRounds, benchBudgetMs } from './rounds.js';
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import { allowCaller, type AllowCaller } from './client.js';
import { parseOptions } from './options.js';
import { orderCaller } from './order-caller.js';
import { formatCpuTable, formatTable, summarize, type Kind } from './report.js';

/** The goal: the limiter adds at most this much to the order API's p99 at one request in flight. */
const TARGET_ADDED_P99_MS = 1.0;

async function main(run: BenchRun): Promise<number> {
  const hop = process.argv.includes('--hop');
  const unbatched = process.argv.includes('--unbatched');
  const calls = process.argv.includes('--calls');
  const argv = process.argv.slice(2).filter((a) => a !== '--hop' && a !== '--unbatched' && a !== '--calls');
  // Defaults of its own: one request at a time, and a longer warm-up. At
  // concurrency 1, 2 s warm up only a few thousand requests per kind: the first
  // measured round was then the slowest of every run (the service's p99 5.2-5.7
  // ms against 1.6-2.6 in the rounds after it; docs/benchmarks.md).
  const withDefaults = [...argv];
  if (!argv.some((a) => a.startsWith('--concurrency'))) withDefaults.push('--concurrency', '1');
  if (!argv.some((a) => a.startsWith('--warmup'))) withDefaults.push('--warmup', '6');
  const options = parseOptions(withDefaults);
  run.watchdog(benchBudgetMs(options, 2 + Number(hop) + Number(unbatched) + Number(calls), 90_000));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const limitedApi = await startServerChild('limited', 'order-api-server.ts', [String(service.port), 'limited'], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => limitedApi.stop());
  const unlimitedApi = await startServerChild('unlimited', 'order-api-server.ts', [String(service.port), 'unlimited'], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => unlimitedApi.stop());
  const callsApi = calls
    ? await startServerChild('calls', 'order-api-server.ts', [String(service.port), 'calls'], { cpuProfDir: options.cpuProfDir })
    : undefined;
  if (callsApi !== undefined) run.onCleanup(() => callsApi.stop());
  const unbatchedApi = unbatched
    ? await startServerChild('unbatched', 'order-api-server.ts', [String(service.port), 'unbatched'], { cpuProfDir: options.cpuProfDir })
    : undefined;
  if (unbatchedApi !== undefined) run.onCleanup(() => unbatchedApi.stop());
  const callers: Partial<Record<Kind, AllowCaller>> = {
    noop: orderCaller(unlimitedApi.port, options.concurrency),
    service: orderCaller(limitedApi.port, options.concurrency),
    ...(callsApi !== undefined ? { calls: orderCaller(callsApi.port, options.concurrency) } : {}),
    ...(unbatchedApi !== undefined ? { unary: orderCaller(unbatchedApi.port, options.concurrency) } : {}),
    ...(hop ? { raw: allowCaller(service.port) } : {}),
  };
  run.onCleanup(async () => Object.values(callers).forEach((c) => c.close()));
  const kinds: Kind[] = [
    'noop',
    'service',
    ...(calls ? (['calls'] as const) : []),
    ...(unbatched ? (['unary'] as const) : []),
    ...(hop ? (['raw'] as const) : []),
  ];

  process.stdout.write(
    `POST /api/orders: order API with the limiter (service) vs without (noop), quota service on Redis ${redis.url}\n` +
      `concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per kind, warm-up ${options.warmupSeconds} s per kind; ` +
      `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  // CPU per request of the order API process each kind talks to (raw: of the quota service).
  const pids: Partial<Record<Kind, number | undefined>> = {
    noop: unlimitedApi.pid,
    service: limitedApi.pid,
    calls: callsApi?.pid,
    unary: unbatchedApi?.pid,
    raw: service.pid,
  };
  const rounds = await alternateRounds({ kinds, callers, options, cpu: { pidOf: (kind) => pids[kind], redis: redis.client() } });
  const without = summarize(rounds, 'noop');
  const withLimiter = summarize(rounds, 'service');
  const added = withLimiter.p99Ms - without.p99Ms;
  const extra = kinds.slice(2).map((kind) => summarize(rounds, kind));
  process.stdout.write(
    `\nmedians over ${options.rounds} rounds (noop = no limiter, service = with the limiter` +
      `${calls ? ', calls = with the limiter, a gRPC call per batch instead of AllowStream' : ''}${unbatched ? ', unary = with the limiter, batching off' : ''}${hop ? ', raw = a bare Allow to the same quota service' : ''}):\n` +
      `${formatTable([without, withLimiter, ...extra])}\n\n`,
  );
  process.stdout.write(
    `p99 added by the limiter: ${added.toFixed(2)} ms (p50 ${(withLimiter.p50Ms - without.p50Ms).toFixed(2)} ms)  target <= ${TARGET_ADDED_P99_MS} ms: ${added <= TARGET_ADDED_P99_MS ? 'MET' : 'NOT MET'}\n`,
  );
  process.stdout.write(
    `\nCPU during the measured rounds (driver = this process; server = the order API process of that kind, for raw the quota service):\n` +
      `${formatCpuTable([without, withLimiter, ...extra])}\n`,
  );
  if ([without, withLimiter, ...extra].some((s) => s.errors > 0)) {
    process.stderr.write('bench: some requests failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
