// `make bench`: the same POST /api/orders route on Express and on Fastify, each
// with no limiter, with the quota service (@quota-service/http, the quota
// client batching, the service, Redis), and with the framework's usual Redis
// limiter (express-rate-limit + rate-limit-redis; @fastify/rate-limit), all on
// one Redis, at several concurrencies, kinds alternating at every step
// (bench/sweep.ts). Every limiter keeps a fixed window per user that never
// fills (bench/servers/route-limiter.ts): every request is an allowed decision.
//
//   npx tsx bench/http-limiters-run.ts [--concurrencies 1,4,16,64,128] [--rounds 3] [--seconds 3] [--warmup 2]
//
// Up to 128 requests in flight by default: past that, on two cores shared by the
// load, six route servers, the quota service and Redis, a request can wait
// longer than a step's grace and is counted as failed.
import { cpus, totalmem } from 'node:os';
import { startRedisServer } from '../test/support/redis-server.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { writeBenchOut } from './bench-out.js';
import { startServerChild } from './children.js';
import { packageVersions } from './package-versions.js';
import { routeCaller } from './route-caller.js';
import { formatPointLine, type SweepKind, sweep, sweepBudgetMs } from './sweep.js';
import { parseSweepOptions } from './sweep-options.js';
import { formatSweepTable, sweepMedians } from './sweep-table.js';

const USAGE = 'usage: npx tsx bench/http-limiters-run.ts [--concurrencies 1,4,16,64,128] [--rounds 3] [--seconds 3] [--warmup 2]';

/** The route servers: framework and limiter, and what a reader sees (a plot panel per group, a line per series). */
const ROUTES = [
  { id: 'express-none', framework: 'express', limiter: 'none', group: 'Express', series: 'no limiter' },
  { id: 'express-quota', framework: 'express', limiter: 'quota', group: 'Express', series: 'quota service' },
  { id: 'express-native', framework: 'express', limiter: 'native', group: 'Express', series: 'express-rate-limit' },
  { id: 'fastify-none', framework: 'fastify', limiter: 'none', group: 'Fastify', series: 'no limiter' },
  { id: 'fastify-quota', framework: 'fastify', limiter: 'quota', group: 'Fastify', series: 'quota service' },
  { id: 'fastify-native', framework: 'fastify', limiter: 'native', group: 'Fastify', series: '@fastify/rate-limit' },
] as const;

async function main(run: BenchRun): Promise<number> {
  const options = parseSweepOptions(process.argv.slice(2), { concurrencies: [1, 4, 16, 64, 128], rounds: 3, seconds: 3, warmupSeconds: 2 }, USAGE);
  run.watchdog(sweepBudgetMs({ ...options, kinds: ROUTES.length }));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const connections = Math.max(...options.concurrencies);
  const kinds: SweepKind[] = [];
  for (const route of ROUTES) {
    const child = await startServerChild(route.id, 'http-route-server.ts', [route.framework, route.limiter, String(service.port), redis.url]);
    run.onCleanup(() => child.stop());
    kinds.push({ id: route.id, label: `${route.group}, ${route.series}`, caller: routeCaller(child.port, connections) });
  }
  run.onCleanup(() => kinds.forEach((k) => k.caller.close()));
  const labels = new Map(kinds.map((k) => [k.id, k.label]));

  process.stdout.write(
    `POST /api/orders on Express and Fastify: no limiter, the quota service, the framework's Redis limiter; one Redis ${redis.url};\n` +
      `fixed window per user, 10,000 users; each server in its own process, keep-alive connections, one per request in flight\n` +
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
  process.stdout.write(`\nmedians over ${options.rounds} rounds, requests/s (p99):\n${formatSweepTable(medians, labels)}\n`);
  writeBenchOut({
    kinds: ROUTES.map(({ id, group, series }) => ({ id, label: `${group}, ${series}`, group, series })),
    versions: packageVersions(['express', 'express-rate-limit', 'rate-limit-redis', 'fastify', '@fastify/rate-limit', 'ioredis']),
    points,
  });
  if (points.some((p) => p.errors > 0)) {
    process.stderr.write('bench: some requests failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

benchMain(main);
