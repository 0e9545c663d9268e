// `make bench`, third part: latency of POST /api/orders through the reference
// order API with the limiter (quota client -> quota service -> Redis) vs the
// same API whose limiter allows without asking, same run, alternating rounds.
// One request in flight by default, so latency is measured below saturation.
//
//   npx tsx bench/order-api-run.ts [--seconds 4] [--concurrency 1] [--rounds 3] [--warmup 2]
import { benchMain, type BenchRun } from './bench-main.js';
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import type { AllowCaller } from './client.js';
import { driveLoad } from './load.js';
import { parseOptions } from './options.js';
import { orderCaller } from './order-caller.js';
import { formatRoundLine, formatTable, summarize, type Kind, type Round } from './report.js';

const ROUND_GRACE_MS = 5_000;
/** The target: the limiter adds at most this much to the order API's p99. */
const TARGET_ADDED_P99_MS = 1.5;

async function main(run: BenchRun): Promise<number> {
  const argv = process.argv.slice(2);
  const options = parseOptions(argv.some((a) => a.startsWith('--concurrency')) ? argv : [...argv, '--concurrency', '1']);
  const budgetMs = 90_000 + 2 * options.warmupSeconds * 1000 + options.rounds * 2 * (options.seconds * 1000 + ROUND_GRACE_MS);
  run.watchdog(budgetMs);

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const limitedApi = await startServerChild('limited', 'order-api-server.ts', [String(service.port), 'limited']);
  run.onCleanup(() => limitedApi.stop());
  const unlimitedApi = await startServerChild('unlimited', 'order-api-server.ts', [String(service.port), 'unlimited']);
  run.onCleanup(() => unlimitedApi.stop());
  const callers: Partial<Record<Kind, AllowCaller>> = {
    noop: orderCaller(unlimitedApi.port, options.concurrency),
    service: orderCaller(limitedApi.port, options.concurrency),
  };
  run.onCleanup(async () => Object.values(callers).forEach((c) => c.close()));
  const kinds: Kind[] = ['noop', 'service'];

  process.stdout.write(
    `POST /api/orders: order API with the limiter (service) vs without (noop), quota service on Redis ${redis.url}\n` +
      `concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per kind, warm-up ${options.warmupSeconds} s per kind; ` +
      `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );
  const load = (kind: Kind, seconds: number) =>
    driveLoad({ call: (callers[kind] as AllowCaller).call, concurrency: options.concurrency, durationMs: seconds * 1000, graceMs: ROUND_GRACE_MS });
  if (options.warmupSeconds > 0) for (const kind of kinds) await load(kind, options.warmupSeconds);

  const rounds: Round[] = [];
  const nan = { driverMs: Number.NaN, serverMs: Number.NaN, redisMs: Number.NaN };
  for (let round = 1; round <= options.rounds; round++) {
    for (const kind of kinds) {
      const entry: Round = { round, kind, result: await load(kind, options.seconds), cpu: nan };
      rounds.push(entry);
      process.stdout.write(`${formatRoundLine(entry)}\n`);
    }
  }
  const without = summarize(rounds, 'noop');
  const withLimiter = summarize(rounds, 'service');
  const added = withLimiter.p99Ms - without.p99Ms;
  process.stdout.write(`\nmedians over ${options.rounds} rounds (noop = no limiter, service = with the limiter):\n${formatTable([without, withLimiter])}\n\n`);
  process.stdout.write(
    `p99 added by the limiter: ${added.toFixed(2)} ms (p50 ${(withLimiter.p50Ms - without.p50Ms).toFixed(2)} ms)  target <= ${TARGET_ADDED_P99_MS} ms: ${added <= TARGET_ADDED_P99_MS ? 'MET' : 'NOT MET'}\n`,
  );
  if (without.errors + withLimiter.errors > 0) {
    process.stderr.write('bench: some requests failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
