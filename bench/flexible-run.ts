// `make bench`: decisions/s through the quota service with the batching quota
// client vs rate-limiter-flexible (RateLimiterRedis, in this process) on the
// same Redis, kinds alternating round by round (same-run baseline, as
// bench/run.ts and bench/batch-run.ts). The target: batched >= 1.0x flexible.
//
//   npx tsx bench/flexible-run.ts [--seconds 4] [--concurrency 256] [--rounds 3] [--warmup 2] [--calls]
//
// --calls: one more kind, "calls", the same client sending each batch as its
// own AllowBatch call instead of a message on one AllowStream.
import { benchMain, type BenchRun } from './bench-main.js';
import { alternateRounds, benchBudgetMs } from './rounds.js';
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import type { AllowCaller } from './client.js';
import { flexibleCaller } from './flexible-caller.js';
import { parseOptions } from './options.js';
import { quotaClientCaller } from './quota-client-caller.js';
import { formatCpuTable, formatTable, summarize, type Kind } from './report.js';
import { median } from './stats.js';

/** The quota client's default batch, as in bench/batch-run.ts. */
const BATCH = { maxDelayMs: 0, maxSize: 100 };
/** The target: the batching client at least as fast as rate-limiter-flexible. */
const TARGET_RATIO = 1.0;

async function main(run: BenchRun): Promise<number> {
  const calls = process.argv.includes('--calls');
  const argv = process.argv.slice(2).filter((a) => a !== '--calls');
  const options = parseOptions(argv.some((a) => a.startsWith('--concurrency')) ? argv : [...argv, '--concurrency', '256']);
  run.watchdog(benchBudgetMs(options, 2 + Number(calls)));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => service.stop());
  const callers: Partial<Record<Kind, AllowCaller>> = {
    batched: quotaClientCaller(service.port, BATCH),
    flexible: flexibleCaller(redis.url),
    ...(calls ? { calls: quotaClientCaller(service.port, BATCH, false) } : {}),
  };
  run.onCleanup(async () => Object.values(callers).forEach((c) => c.close()));
  const kinds: Kind[] = ['flexible', 'batched', ...(calls ? (['calls'] as const) : [])];

  process.stdout.write(
    `Quota service + batching quota client (maxDelayMs ${BATCH.maxDelayMs}, maxSize ${BATCH.maxSize}) vs rate-limiter-flexible ` +
      `RateLimiterRedis in-process, same Redis ${redis.url}\n` +
      `concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per kind, warm-up ${options.warmupSeconds} s per kind; ` +
      `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  const redisInfo = redis.client();
  const rounds = await alternateRounds({ kinds, callers, options, cpu: { pidOf: () => service.pid, redis: redisInfo } });

  const flexible = summarize(rounds, 'flexible');
  const batched = summarize(rounds, 'batched');
  const perRound = rounds
    .filter((r) => r.kind === 'batched')
    .map((b) => b.result.decisionsPerSecond / (rounds.find((f) => f.kind === 'flexible' && f.round === b.round)?.result.decisionsPerSecond ?? Number.NaN));
  const ratio = batched.decisionsPerSecond / flexible.decisionsPerSecond;
  const extra = calls ? [summarize(rounds, 'calls')] : [];
  process.stdout.write(
    `\nmedians over ${options.rounds} rounds (batched = the quota client's batches on one AllowStream${calls ? ', calls = one AllowBatch call per batch' : ''}):\n` +
      `${formatTable([flexible, batched, ...extra])}\n\n`,
  );
  process.stdout.write(
    `ratio batched/flexible (median decisions/s): ${ratio.toFixed(2)}  target >= ${TARGET_RATIO.toFixed(1)}: ${ratio >= TARGET_RATIO ? 'MET' : 'NOT MET'}\n` +
      `per-round ratios: ${perRound.map((r) => r.toFixed(2)).join(', ')}  (median ${median(perRound).toFixed(2)})\n\n`,
  );
  process.stdout.write(
    `CPU during the measured rounds (driver = this process, where rate-limiter-flexible runs; server = the quota service):\n` +
      `${formatCpuTable([flexible, batched, ...extra])}\n\n`,
  );
  if ([flexible, batched, ...extra].some((s) => s.errors > 0)) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
