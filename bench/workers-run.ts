// `make bench`: the quota service with QUOTA_WORKERS=1 and =2 on the same Redis, in
// one run: the most unary ShouldRateLimit calls per second each decides in the store
// (load by h2load, closed loop, 4 connections with 16 calls in flight on each, as a
// fleet of Envoys keeps them; decisions counted by the service's own summed metrics
// endpoint), rounds alternating between the two; then the ratio of the medians and
// the machine's load average before and after.
//
//   npx tsx bench/workers-run.ts [--seconds 4] [--rounds 5] [--warmup 5] [--workers 2]
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startRedisServer } from '../test/support/redis-server.js';
import { rlsRequestBytes } from '../test/support/rls-client.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { processCpuMs, redisCpuMs } from './cpu.js';
import { grpcFrame, h2loadAvailable, h2loadClosedLoop } from './h2load.js';
import { rawUnaryCaller } from './raw-unary.js';
import { median } from './stats.js';
import { startWorkersService, type WorkersService } from './workers-service.js';

const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const LOAD = { clients: 4, streams: 16 } as const;
/** The goal on a two-core machine: two workers answer at least this much more than one. */
const GOAL = 1.3;

const request = rlsRequestBytes({
  domain: 'bench',
  descriptors: [{ entries: [{ key: 'user', value: 'bench-user' }] }, { entries: [{ key: 'tenant', value: 'bench-tenant' }] }],
});

/** h2load counts HTTP answers, not gRPC statuses: one call through a client that reads the status first. */
async function checkAnswers(service: WorkersService): Promise<void> {
  const caller = rawUnaryCaller(service.port, PATH, [request]);
  try {
    await caller.call(new AbortController().signal);
  } finally {
    caller.close();
  }
}

/** CPU time of the service's processes so far, in ms. */
const serviceCpuMs = (service: WorkersService) => service.pids.reduce((sum, pid) => sum + processCpuMs(pid), 0);

const loadLine = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      seconds: { type: 'string', default: '4' },
      rounds: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '5' },
      workers: { type: 'string', default: '2' },
    },
    strict: true,
  });
  const [seconds, rounds, warmup, many] = [values.seconds, values.rounds, values.warmup, values.workers].map(Number) as [number, number, number, number];
  if (![seconds, rounds, warmup, many].every((n) => Number.isFinite(n) && n >= 0) || many < 2 || rounds < 1 || seconds <= 0) {
    process.stderr.write('usage: npx tsx bench/workers-run.ts [--seconds 4] [--rounds 5] [--warmup 5] [--workers 2] (workers at least 2)\n');
    return 2;
  }
  if (!h2loadAvailable()) {
    process.stderr.write('bench: h2load not found (make h2load installs it)\n');
    return 1;
  }
  // Start-up: the compile (bench/compiled.ts) and six Node processes, minutes on a busy machine.
  run.watchdog(300_000 + 2 * (warmup + rounds * (seconds + 5)) * 1000);
  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const kinds = [1, many];
  const services = new Map<number, WorkersService>();
  for (const workers of kinds) {
    const service = await startWorkersService(workers, redis.url);
    run.onCleanup(() => service.stop());
    services.set(workers, service);
    await checkAnswers(service);
  }
  const loadBefore = loadLine();
  process.stdout.write(
    `QUOTA_WORKERS=1 against QUOTA_WORKERS=${many}: unary ShouldRateLimit (two descriptors, token buckets that never run dry), one Redis ${redis.url}\n` +
      `h2load closed loop, ${LOAD.clients} connections x ${LOAD.streams} calls in flight, ${rounds} alternating rounds x ${seconds} s ` +
      `after ${warmup} s of warm-up each; node ${process.version}, ${cpus().length} cpus; load average before: ${loadBefore}\n\n`,
  );
  const frame = grpcFrame(request);
  if (warmup > 0)
    for (const workers of kinds) await h2loadClosedLoop(`http://127.0.0.1:${services.get(workers)!.port}${PATH}`, frame, { ...LOAD, seconds: warmup });
  const rates = new Map<number, number[]>(kinds.map((workers) => [workers, []]));
  // CPU over all rounds: the service's processes (primary and workers) and Redis, per decision.
  const cpu = new Map(kinds.map((workers) => [workers, { service: 0, redis: 0, decisions: 0 }]));
  const redisClient = redis.client();
  run.onCleanup(() => void redisClient.disconnect());
  let errors = 0;
  for (let round = 0; round < rounds; round++) {
    const line: string[] = [];
    for (const workers of kinds) {
      const service = services.get(workers)!;
      const before = await service.decided();
      const cpuBefore = { service: serviceCpuMs(service), redis: await redisCpuMs(redisClient) };
      const result = await h2loadClosedLoop(`http://127.0.0.1:${service.port}${PATH}`, frame, { ...LOAD, seconds });
      const cpuAfter = { service: serviceCpuMs(service), redis: await redisCpuMs(redisClient) };
      const after = await service.decided();
      const decisions = after.store - before.store;
      cpu.get(workers)!.service += cpuAfter.service - cpuBefore.service;
      cpu.get(workers)!.redis += cpuAfter.redis - cpuBefore.redis;
      cpu.get(workers)!.decisions += decisions;
      // Counted by the service (its summed metrics), not by h2load, which cannot tell a gRPC error from an answer.
      const perSecond = (after.store - before.store) / seconds;
      rates.get(workers)!.push(perSecond);
      errors += result.failed + (after.all - before.all) - (after.store - before.store);
      line.push(`${workers} worker${workers === 1 ? '' : 's'} ${perSecond.toFixed(0)}/s (h2load: ${(result.succeeded / seconds).toFixed(0)}/s answered)`);
    }
    process.stdout.write(`round ${round + 1} ${line.join(', ')}\n`);
  }
  const rows = [
    '| QUOTA_WORKERS | max ShouldRateLimit decisions/s (median of rounds) | slowest round | fastest round | service CPU µs per decision | Redis CPU µs per decision |',
    '|---:|---:|---:|---:|---:|---:|',
  ];
  for (const workers of kinds) {
    const each = rates.get(workers)!;
    const used = cpu.get(workers)!;
    const perDecision = (ms: number) => ((ms * 1000) / used.decisions).toFixed(0);
    rows.push(
      `| ${workers} | ${median(each).toFixed(0)} | ${Math.min(...each).toFixed(0)} | ${Math.max(...each).toFixed(0)} | ${perDecision(used.service)} | ${perDecision(used.redis)} |`,
    );
  }
  const ratio = median(rates.get(many)!) / median(rates.get(1)!);
  process.stdout.write(
    `\n${rows.join('\n')}\n\n${many} workers / 1 worker max: ${ratio.toFixed(2)}x target >= ${GOAL}: ${ratio >= GOAL ? 'MET' : 'NOT MET'}\n` +
      `load average after: ${loadLine()}\n`,
  );
  if (errors > 0) {
    process.stderr.write(`bench: ${errors} calls failed; the figures above are not trustworthy\n`);
    return 1;
  }
  return 0;
}

benchMain(main);
