// `make bench`, second part: decisions/s through the quota client with
// batching (its default: batches on one AllowStream) vs the same client sending
// one Allow per call, against
// the same quota service child on the same Redis, kinds alternating round by
// round (same-run baseline, as bench/run.ts).
//
//   npx tsx bench/batch-run.ts [--seconds 4] [--concurrency 256] [--rounds 3] [--warmup 2]
import { benchMain, type BenchRun } from './bench-main.js';
import { alternateRounds, benchBudgetMs } from './rounds.js';
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import { allowCaller, type AllowCaller } from './client.js';
import { parseOptions } from './options.js';
import { quotaClientCaller } from './quota-client-caller.js';
import { formatCpuTable, formatTable, summarize, type Kind } from './report.js';
import { median } from './stats.js';

/** The client's default batch: no wait when nothing is in flight, at most 100 per batch. */
const BATCH = { maxDelayMs: 0, maxSize: 100 };

async function main(run: BenchRun): Promise<number> {
  const argv = process.argv.slice(2);
  // Batching needs calls in flight to coalesce: a higher default than the unary bench.
  const options = parseOptions(argv.some((a) => a.startsWith('--concurrency')) ? argv : [...argv, '--concurrency', '256']);
  run.watchdog(benchBudgetMs(options, 3));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => service.stop());
  const callers: Partial<Record<Kind, AllowCaller>> = {
    raw: allowCaller(service.port),
    unary: quotaClientCaller(service.port, false),
    batched: quotaClientCaller(service.port, BATCH),
  };
  run.onCleanup(async () => Object.values(callers).forEach((c) => c.close()));
  // raw: bare nice-grpc unary Allow (bench/client.ts, as in bench/run.ts), to show what the client itself costs.
  const kinds: Kind[] = ['raw', 'unary', 'batched'];

  process.stdout.write(
    `Quota client: AllowBatch coalescing (maxDelayMs ${BATCH.maxDelayMs}, maxSize ${BATCH.maxSize}) vs one Allow per call, same service on Redis ${redis.url}\n` +
      `concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per kind, warm-up ${options.warmupSeconds} s per kind; ` +
      `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  const redisInfo = redis.client();
  const rounds = await alternateRounds({ kinds, callers, options, cpu: { pidOf: () => service.pid, redis: redisInfo } });

  const raw = summarize(rounds, 'raw');
  const unary = summarize(rounds, 'unary');
  const batched = summarize(rounds, 'batched');
  const perRound = rounds
    .filter((r) => r.kind === 'batched')
    .map((b) => b.result.decisionsPerSecond / (rounds.find((u) => u.kind === 'unary' && u.round === b.round)?.result.decisionsPerSecond ?? Number.NaN));
  process.stdout.write(`\nmedians over ${options.rounds} rounds:\n${formatTable([raw, unary, batched])}\n\n`);
  process.stdout.write(
    `ratio batched/unary (median decisions/s): ${(batched.decisionsPerSecond / unary.decisionsPerSecond).toFixed(2)}\n` +
      `per-round ratios: ${perRound.map((r) => r.toFixed(2)).join(', ')}  (median ${median(perRound).toFixed(2)})\n\n`,
  );
  process.stdout.write(`CPU during the measured rounds (driver = this process; server = the quota service):\n${formatCpuTable([raw, unary, batched])}\n\n`);
  process.stdout.write(`redis keys after the run: ${await redisInfo.dbsize()}\n`);
  if (raw.errors + unary.errors + batched.errors > 0) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
