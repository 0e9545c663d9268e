// `make bench`: unary Allow over gRPC against the quota service on a real Redis,
// next to a no-op server with the same proto, in one run, so that the ratio
// between the two says how much of the transport's capacity the decision keeps,
// whatever the machine or its neighbours are doing at the moment.
//
//   npx tsx bench/run.ts [--seconds 4] [--concurrency 48] [--rounds 3] [--warmup 2] [--cpu-prof DIR]
//
// Files: options.ts (flags), servers/*.ts (server children), children.ts
// (starting/stopping them), client.ts (the Allow call), load.ts (closed-loop
// driver), stats.ts, report.ts (medians, table, ratio).
import { benchMain, type BenchRun } from './bench-main.js';
import { alternateRounds, benchBudgetMs } from './rounds.js';
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import { allowCaller, type AllowCaller } from './client.js';
import { parseOptions } from './options.js';
import { formatCpuTable, formatRatio, formatTable, roundRatios, summarize, type Kind } from './report.js';

async function main(run: BenchRun): Promise<number> {
  const options = parseOptions(process.argv.slice(2));

  run.watchdog(benchBudgetMs(options, 2));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const noopChild = await startServerChild('noop', 'noop-server.ts', [], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => noopChild.stop());
  const serviceChild = await startServerChild('service', 'quota-server.ts', [redis.url], { cpuProfDir: options.cpuProfDir });
  run.onCleanup(() => serviceChild.stop());

  const callers: Partial<Record<Kind, AllowCaller>> = { noop: allowCaller(noopChild.port), service: allowCaller(serviceChild.port) };
  run.onCleanup(async () => Object.values(callers).forEach((c) => c.close()));

  process.stdout.write(
    `Unary Allow: quota service (Redis ${redis.url}) vs no-op server, same proto and stack\n` +
      `concurrency ${options.concurrency}, ${options.rounds} rounds x ${options.seconds} s per kind, ` +
      `warm-up ${options.warmupSeconds} s per kind; node ${process.version}, ${cpus().length} cpus, ` +
      `${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
  );

  const kinds: Kind[] = ['noop', 'service'];
  const redisInfo = redis.client();
  const pids: Partial<Record<Kind, number | undefined>> = { noop: noopChild.pid, service: serviceChild.pid };
  const rounds = await alternateRounds({ kinds, callers, options, cpu: { pidOf: (kind) => pids[kind], redis: redisInfo } });

  // Evidence that the service really decided in Redis: one bucket key per user it saw.
  const keys = await redisInfo.dbsize();

  const noop = summarize(rounds, 'noop');
  const service = summarize(rounds, 'service');
  process.stdout.write(`\nmedians over ${options.rounds} rounds:\n${formatTable([noop, service])}\n\n`);
  process.stdout.write(`${formatRatio(noop, service, roundRatios(rounds))}\n\n`);
  process.stdout.write(`CPU during the measured rounds (driver = this process; ${cpus().length} cores in all):\n${formatCpuTable([noop, service])}\n\n`);
  process.stdout.write(`redis keys after the run: ${keys} (bucket per user id)\n`);

  if (noop.errors + service.errors > 0) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  if (service.allowedShare < 0.99) {
    process.stderr.write('bench: under 99% of service decisions were allowed; the bench policy no longer measures the allowed path\n');
    return 1;
  }
  return 0;
}

benchMain(main);
