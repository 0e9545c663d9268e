// `make bench`, second part: decisions/s through the quota client with
// AllowBatch coalescing vs the same client sending one Allow per call, against
// the same quota service child on the same Redis, kinds alternating round by
// round (same-run baseline, as bench/run.ts).
//
//   npx tsx bench/batch-run.ts [--seconds 4] [--concurrency 256] [--rounds 3] [--warmup 2]
import { benchMain, type BenchRun } from './bench-main.js';
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import { allowCaller, type AllowCaller } from './client.js';
import { cpuBetween, sampleCpu } from './cpu.js';
import { driveLoad } from './load.js';
import { parseOptions } from './options.js';
import { quotaClientCaller } from './quota-client-caller.js';
import { formatCpuTable, formatRoundLine, formatTable, summarize, type Kind, type Round } from './report.js';
import { median } from './stats.js';

const ROUND_GRACE_MS = 5_000;
/** The client's default batch: flush at the end of the event-loop turn, at most 100 per batch. */
const BATCH = { maxDelayMs: 0, maxSize: 100 };

async function main(run: BenchRun): Promise<number> {
  const argv = process.argv.slice(2);
  // Batching needs calls in flight to coalesce: a higher default than the unary bench.
  const options = parseOptions(argv.some((a) => a.startsWith('--concurrency')) ? argv : [...argv, '--concurrency', '256']);
  const budgetMs = 60_000 + 2 * options.warmupSeconds * 1000 + options.rounds * 3 * (options.seconds * 1000 + ROUND_GRACE_MS);
  run.watchdog(budgetMs);

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => service.stop());
  const callers: Partial<Record<Kind, AllowCaller>> = {
    raw: allowCaller(service.port),
    unary: quotaClientCaller(service.port, false), batched: quotaClientCaller(service.port, BATCH) };
  run.onCleanup(async () => Object.values(callers).forEach((c) => c.close()));
  // raw: bare nice-grpc unary Allow (bench/client.ts, as in bench/run.ts), to show what the client itself costs.
  const kinds: Kind[] = ['raw', 'unary', 'batched'];

  process.stdout.write(
    `Quota client: AllowBatch coalescing (maxDelayMs ${BATCH.maxDelayMs}, maxSize ${BATCH.maxSize}) vs one Allow per call, same service on Redis ${redis.url}\n` +
      `concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per kind, warm-up ${options.warmupSeconds} s per kind; ` +
      `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  const load = (kind: Kind, seconds: number) =>
    driveLoad({ call: (callers[kind] as AllowCaller).call, concurrency: options.concurrency, durationMs: seconds * 1000, graceMs: ROUND_GRACE_MS });
  if (options.warmupSeconds > 0) for (const kind of kinds) await load(kind, options.warmupSeconds);

  const redisInfo = redis.client();
  const rounds: Round[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    for (const kind of kinds) {
      const before = await sampleCpu(service.pid, redisInfo);
      const result = await load(kind, options.seconds);
      const after = await sampleCpu(service.pid, redisInfo);
      const entry: Round = { round, kind, result, cpu: cpuBetween(before, after) };
      rounds.push(entry);
      process.stdout.write(`${formatRoundLine(entry)}\n`);
    }
  }

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
