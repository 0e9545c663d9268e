// Drives only the batching quota client against the quota service on Redis
// (the "batched" kind of bench/flexible-run.ts), so a CPU profile of this
// process is the client's cost per decision and nothing else:
//
//   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/client-profile.ts [--seconds 4] [--concurrency 256] [--warmup 2] [--batch off]
//
// Prints decisions/s and the driver's CPU µs per decision, and the measured
// window on the monotonic clock V8's profiles use (bench/cpu-breakdown.ts
// reads it), the time Redis spent in the decide script per script call (its
// command statistics), and per decision what the scheduler counted for the
// main thread of each process (bench/sched.ts): time on a CPU, time waiting
// for one, sleeps; and for the caller and the service, event-loop turns and
// bytes allocated on the JavaScript heap (bench/process-counters.ts).
// `--service-profile DIR`: the service child writes a CPU profile there too.
// `--relay`: the same load on the floor of that path instead, the two-hop relay
// of bench/limiters-run.ts (a grpc-js stream to a Node process that answers
// each message once one Redis command has), reported as if it were the service.
import { parseArgs } from 'node:util';
import { benchMain, type BenchRun } from './bench-main.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { startServerChild } from './children.js';
import { driveLoad } from './load.js';
import { quotaClientCaller } from './quota-client-caller.js';
import { relayCaller } from './hops.js';
import { ROUND_GRACE_MS } from './rounds.js';
import { redisCpuMs } from './cpu.js';
import { type SchedSample, sampleSched } from '../test/support/sched.js';
import { schedPer } from './sched.js';
import { type ProcessCounters, countersPer, readCounters } from './process-counters.js';

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      seconds: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '256' },
      warmup: { type: 'string', default: '2' },
      batch: { type: 'string', default: 'on' },
      'service-profile': { type: 'string' },
      relay: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const seconds = Number(values.seconds);
  const concurrency = Number(values.concurrency);
  const warmup = Number(values.warmup);
  run.watchdog(60_000 + (seconds + warmup) * 1000 + 2 * ROUND_GRACE_MS);
  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const profile = { cpuProfDir: values['service-profile'] };
  const service = values.relay
    ? await startServerChild('service', 'echo-server.ts', ['relay', redis.url], profile)
    : await startServerChild('service', 'quota-server.ts', [redis.url], profile);
  run.onCleanup(() => service.stop());
  const caller = values.relay ? relayCaller(service.port) : quotaClientCaller(service.port, values.batch === 'off' ? false : { maxDelayMs: 0, maxSize: 100 });
  run.onCleanup(() => caller.close());
  const load = (s: number) => driveLoad({ call: caller.call, concurrency, durationMs: s * 1000, graceMs: ROUND_GRACE_MS });
  if (warmup > 0) await load(warmup);
  const before = process.cpuUsage();
  const redisClient = redis.client();
  const redisBefore = await redisCpuMs(redisClient);
  await redisClient.config('RESETSTAT');
  const pids = { caller: process.pid, service: service.pid, redis: redis.pid };
  const sample = () => Object.values(pids).map((pid) => (pid === undefined ? undefined : sampleSched(pid)));
  const counters = async () => ({ caller: readCounters(), service: await service.counters() });
  const countersBefore = await counters();
  const schedBefore = sample();
  const windowStart = process.hrtime.bigint() / 1000n;
  const result = await load(seconds);
  const windowEnd = process.hrtime.bigint() / 1000n;
  const schedAfter = sample();
  const countersAfter = await counters();
  const cpu = process.cpuUsage(before);
  const redisMs = (await redisCpuMs(redisClient)) - redisBefore;
  // The decide script's calls: FCALL of its library, or EVALSHA where the store sends it as a script.
  const script = /^cmdstat_(?:fcall|evalsha):calls=(\d+),usec=(\d+)/m.exec(await redisClient.info('commandstats'));
  redisClient.disconnect();
  const cpuUs = cpu.user + cpu.system;
  process.stdout.write(
    `batch ${values.batch}, concurrency ${concurrency}: ${result.decisionsPerSecond.toFixed(0)} decisions/s, ` +
      `p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, driver ${(cpuUs / result.calls).toFixed(1)} µs/decision, errors ${result.errors}\n` +
      `window ${windowStart}-${windowEnd} µs, decisions ${result.calls}, redis ${((redisMs * 1000) / result.calls).toFixed(1)} µs/decision\n` +
      `redis script ${script === null ? 'n/a' : (Number(script[2]) / Number(script[1])).toFixed(1)} µs/call, ${script === null ? 'n/a' : (Number(script[1]) / result.calls).toFixed(3)} calls/decision\n` +
      Object.keys(pids)
        .map((name, i) => `sched ${name} ${formatSched(schedPer(schedBefore[i], schedAfter[i], result.calls))}\n`)
        .join('') +
      (['caller', 'service'] as const).map((name) => `counters ${name} ${formatCounters(countersBefore[name], countersAfter[name], result.calls)}\n`).join(''),
  );
  return result.errors > 0 ? 1 : 0;
}

/** `on-cpu <µs> wait <µs> sleeps <n>` per decision, or `n/a` (bench/cpu-breakdown.ts reads it). */
function formatSched(per: SchedSample | undefined): string {
  return per === undefined ? 'n/a' : `on-cpu ${per.onCpuUs.toFixed(1)} wait ${per.waitUs.toFixed(1)} sleeps ${per.sleeps.toFixed(2)}`;
}

/** `loops <n> allocated <bytes>` per decision, or `n/a` (bench/cpu-breakdown.ts reads it). */
function formatCounters(before: ProcessCounters | undefined, after: ProcessCounters | undefined, per: number): string {
  if (before === undefined || after === undefined) return 'n/a';
  const { loops, allocatedBytes } = countersPer(before, after, per);
  return `loops ${loops.toFixed(2)} allocated ${allocatedBytes.toFixed(0)}`;
}

benchMain(main);
