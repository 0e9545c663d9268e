// `make bench`: the quota client (batched, through the quota service) against
// rate-limiter-flexible (RateLimiterRedis in this process) on the same Redis, at
// several concurrencies, kinds alternating at every step (bench/sweep.ts). Both
// keep a fixed window per user over 10,000 users that never fills, so every
// call is an allowed decision of the same algorithm. Beside them, in the same
// sweep, the floor of the quota client's path: a two-hop relay (a message on an
// open grpc-js stream to a Node process that answers it once one Redis command
// has answered; bench/servers/echo-server.ts), which does nothing else.
//
// With 1 in flight among the concurrencies, it then measures in the same run
// the floor of the quota client's two hops at one call in flight: a message on
// an open grpc-js stream to an echo server, plus a Redis round trip (PING).
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
import { formatSweepTable, ratioRow, sweepMedians } from './sweep-table.js';
import { grpcHops, type Hop, relayCaller, tcpHop } from './hops.js';
import { driveLoad } from './load.js';
import { median } from './stats.js';

const USAGE = 'usage: npx tsx bench/limiters-run.ts [--concurrencies 1,4,16,64,256,1024] [--rounds 3] [--seconds 3] [--warmup 2]';
/** The quota client's default batch, as in bench/batch-run.ts. */
const BATCH = { maxDelayMs: 0, maxSize: 100 };

async function main(run: BenchRun): Promise<number> {
  const options = parseSweepOptions(process.argv.slice(2), { concurrencies: [1, 4, 16, 64, 256, 1024], rounds: 3, seconds: 3, warmupSeconds: 2 }, USAGE);
  run.watchdog(sweepBudgetMs({ ...options, kinds: 3 }));

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startServerChild('service', 'quota-server.ts', [redis.url]);
  run.onCleanup(() => service.stop());
  const relay = await startServerChild('relay', 'echo-server.ts', ['relay', redis.url]);
  run.onCleanup(() => relay.stop());
  const kinds: SweepKind[] = [
    { id: 'quota', label: 'quota client (batched)', caller: quotaClientCaller(service.port, BATCH, true, 'bench-window') },
    { id: 'flexible', label: 'rate-limiter-flexible', caller: flexibleCaller(redis.url) },
    { id: 'relay', label: 'two-hop relay (floor)', caller: relayCaller(relay.port) },
  ];
  run.onCleanup(() => kinds.forEach((k) => k.caller.close()));
  const labels = new Map(kinds.map((k) => [k.id, k.label]));

  process.stdout.write(
    `Limiters in the caller's process, fixed window per user, 10,000 users, one Redis ${redis.url}:\n` +
      `quota client (default batching, one AllowStream) -> quota service -> Redis, vs rate-limiter-flexible RateLimiterRedis -> Redis,\n` +
      `and the floor of the first: grpc-js stream -> a relay making one Redis call (HINCRBY) per message -> Redis\n` +
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
  const ratios = ['quota', 'relay'].map((id) => ratioRow(medians, id, 'flexible', `${labels.get(id)} / ${labels.get('flexible')}`));
  process.stdout.write(`\nmedians over ${options.rounds} rounds, decisions/s (p99):\n${formatSweepTable(medians, labels)}\n${ratios.join('\n')}\n`);
  const alone = medians.find((m) => m.kind === 'quota' && m.concurrency === 1);
  const floor = alone === undefined ? undefined : await twoHopFloor(run, redis.port, options);
  if (alone !== undefined && floor !== undefined) {
    const sum = floor.streamHopMs + floor.redisRoundTripMs;
    process.stdout.write(
      `\nquota client p50 at 1 in flight: ${alone.p50Ms.toFixed(3)} ms; its two hops' floor, same run: a message on an open grpc-js stream ` +
        `${floor.streamHopMs.toFixed(3)} ms + a Redis round trip ${floor.redisRoundTripMs.toFixed(3)} ms = ${sum.toFixed(3)} ms; ` +
        `${(alone.p50Ms / sum).toFixed(2)}x the floor\n`,
    );
  }
  writeBenchOut({ kinds: kinds.map(({ id, label }) => ({ id, label })), versions: packageVersions(['rate-limiter-flexible', 'ioredis']), points, floor });
  if (points.some((p) => p.errors > 0)) {
    process.stderr.write('bench: some calls failed; the figures above are not trustworthy\n');
    return 1;
  }
  return 0;
}

/**
 * p50 at one call in flight of a message on an open grpc-js stream to an echo
 * server child and of a Redis round trip (PING on a socket of its own to the
 * bench's Redis), medians over the rounds, kinds alternating.
 */
async function twoHopFloor(
  run: BenchRun,
  redisPort: number,
  options: { rounds: number; seconds: number; warmupSeconds: number },
): Promise<{ streamHopMs: number; redisRoundTripMs: number }> {
  const echo = await startServerChild('echo-grpc', 'echo-server.ts', ['grpc']);
  run.onCleanup(() => echo.stop());
  const stream = grpcHops(echo.port, echo.pid).find((hop) => hop.name === 'grpc stream')!;
  const ping = await tcpHop(redisPort, undefined, Buffer.from('PING\r\n'), 'redis');
  const hops: Hop[] = [stream, ping];
  run.onCleanup(() => hops.forEach((hop) => hop.close()));
  const p50s = new Map<Hop, number[]>(hops.map((hop) => [hop, []]));
  for (const hop of hops) await driveLoad({ call: hop.call, concurrency: 1, durationMs: options.warmupSeconds * 1000, graceMs: 5_000 });
  for (let round = 0; round < options.rounds; round++) {
    for (const hop of hops) {
      const load = await driveLoad({ call: hop.call, concurrency: 1, durationMs: options.seconds * 1000, graceMs: 5_000 });
      if (load.errors > 0) throw new Error(`${hop.name}: ${load.errors} calls failed: ${load.firstError ?? ''}`);
      p50s.get(hop)!.push(load.p50Ms);
    }
  }
  return { streamHopMs: median(p50s.get(stream)!), redisRoundTripMs: median(p50s.get(ping)!) };
}

benchMain(main);
