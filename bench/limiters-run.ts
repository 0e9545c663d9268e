// `make bench`: the quota client (batched, through the quota service) against
// rate-limiter-flexible (RateLimiterRedis in this process) on the same Redis, at
// several concurrencies, kinds alternating at every step (bench/sweep.ts). Both
// keep a fixed window per user over 10,000 users that never fills, so every
// call is an allowed decision of the same algorithm.
//
//   npx tsx bench/limiters-run.ts [--concurrencies 1,4,16,64,256,1024] [--rounds 3] [--seconds 3] [--warmup 2]
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { writeBenchOut } from './bench-out.js';
import { startServerChild } from './children.js';
import { flexibleCaller } from './flexible-caller.js';
import { quotaClientCaller } from './quota-client-caller.js';
import { packageVersions } from './package-versions.js';
import { formatPointLine, type SweepKind, sweep, sweepBudgetMs } from './sweep.js';
import { parseSweepOptions } from './sweep-options.js';
import { formatSweepTable, sweepMedians } from './sweep-table.js';

const USAGE = 'usage: npx tsx bench/limiters-run.ts [--concurrencies 1,4,16,64,256,1024] [--rounds 3] [--seconds 3] [--warmup 2]';
/** The quota client's default batch, as in bench/batch-run.ts. */
const BATCH = { maxDelayMs: 0, maxSize: 100 };

async function main(run: BenchRun): Promise<number> {
  const options = parseSweepOptions(process.argv.slice(2), { concurrencies: [1, 4, 16, 64, 256, 1024], rounds: 3, seconds: 3, warmupSeconds: 2 }, USAGE);
  run.watchdog(sweepBudgetMs({ ...options, kinds: 2 }));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const kinds: SweepKind[] = [
    { id: 'quota', label: 'quota client (batched)', caller: quotaClientCaller(service.port, BATCH, true, 'bench-window') },
    { id: 'flexible', label: 'rate-limiter-flexible', caller: flexibleCaller(redis.url) },
  ];
  run.onCleanup(() => kinds.forEach((k) => k.caller.close()));
  const labels = new Map(kinds.map((k) => [k.id, k.label]));

  process.stdout.write(
    `Limiters in the caller's process, fixed window per user, 10,000 users, one Redis ${redis.url}:\n` +
      `quota client (default batching, one AllowStream) -> quota service -> Redis, vs rate-limiter-flexible RateLimiterRedis -> Redis\n` +
      `concurrencies ${options.concurrencies.join(', ')}; ${options.rounds} rounds x ${options.seconds} s per point, warm-up ${options.warmupSeconds} s per kind; ` +
      `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  const points = await sweep({
    ...options,
    kinds,
    onPoint: (point) => process.stdout.write(`${formatPointLine(point, labels.get(point.kind) ?? point.kind)}\n`),
  });
  const medians = sweepMedians(
    points,
    kinds.map((k) => k.id),
  );
  process.stdout.write(`\nmedians over ${options.rounds} rounds, decisions/s (p99):\n${formatSweepTable(medians, labels)}\n`);
  writeBenchOut({ kinds: kinds.map(({ id, label }) => ({ id, label })), versions: packageVersions(['rate-limiter-flexible', 'ioredis']), points });
  if (points.some((p) => p.errors > 0)) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
