// `make soak`: the quota service (the build `npm start` runs) on one Redis, first
// at its maximum for a few seconds to measure it, then at half that rate with a
// request_id on every call for SOAK_MINUTES (default 10), then idle until every
// key has expired. Samples RSS, open descriptors and the key count as it goes,
// and ends with a verdict per bar (bench/soak/verdict.ts); exit 1 if one fails.
//
//   SOAK_MINUTES=2 make soak        (SOAK_RATE=N: hold N decisions/s, skip measuring)
//
// Files: options.ts (settings), service-child.ts, soak-caller.ts (the calls),
// paced-load.ts (fixed-rate load), sampler.ts, verdict.ts, policies.yaml.
import { cpus, hostname, loadavg, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisServer } from '../../test/support/redis-server.js';
import { benchMain, type BenchRun } from '../bench-main.js';
import { driveLoad, type Call } from '../load.js';
import { soakOptions } from './options.js';
import { PacedLoad } from './paced-load.js';
import { longestTtlMs, Sampler } from './sampler.js';
import { startSoakService } from './service-child.js';
import { soakCaller, TENANTS, USERS } from './soak-caller.js';
import { judgeSoak } from './verdict.js';

/** bench/soak/policies.yaml's request_id_ttl_ms. */
const REQUEST_ID_TTL_MS = 30_000;
/** Redis's own tolerance of expired keys not yet deleted (ACTIVE_EXPIRE_CYCLE_ACCEPTABLE_STALE at the default effort). */
const REDIS_STALE_SHARE = 0.1;
const IDLE_GRACE_MS = 30_000;
const MEASURE = { warmupMs: 3_000, durationMs: 10_000, concurrency: 512 };

async function main(run: BenchRun): Promise<number> {
  const options = soakOptions(process.env);
  const out = process.stdout;
  run.watchdog(options.loadMs + 30 * 60_000);

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const service = await startSoakService({
    QUOTA_REDIS_URL: redis.url,
    QUOTA_POLICIES: 'bench/soak/policies.yaml',
    // The soak measures resources over time: on a shared machine a stall past the production
    // budget (50 ms) would hand decisions to the failure mode and count as errors.
    QUOTA_STORE_TIMEOUT_MS: '1000',
    QUOTA_METRICS_ADDR: '127.0.0.1:0',
  });
  run.onCleanup(async () => void (await service.stop()));
  const caller = soakCaller(service.port);
  run.onCleanup(() => caller.close());
  const redisClient = redis.client();
  run.onCleanup(() => void redisClient.disconnect());

  const cpu = cpus()[0]?.model ?? 'unknown cpu';
  out.write(
    `Soak: the quota service (dist/src/main.js, pid ${service.pid}) on Redis ${redis.url}, policy soak (bench/soak/policies.yaml), ` +
      `${USERS} users, a request_id per call\n${new Date().toISOString()}  ${hostname()}: ${cpus().length} x ${cpu}, ` +
      `${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg()[0]!.toFixed(1)}; node ${process.version}\n\n`,
  );

  const sampler = new Sampler(service.pid, redisClient, out);
  let measured = 0;
  let measureSent = 0;
  let measureErrors = 0;
  const counted: Call = async (signal) => {
    measureSent++;
    const allowed = await caller.call(signal);
    measured++;
    return allowed;
  };
  const measureSource = {
    phase: 'measure' as const,
    decisions: () => measured,
    sent: () => measureSent,
    errors: () => measureErrors,
    extra: () => 'before any load',
  };
  // At rest, before any load: the RSS the end of the idle phase is compared with.
  await sampler.sample(measureSource);
  let rate = options.rate;
  if (rate === undefined) {
    sampler.start({ ...measureSource, extra: () => '' }, options.sampleMs);
    measureErrors += (await driveLoad({ call: counted, concurrency: MEASURE.concurrency, durationMs: MEASURE.warmupMs, graceMs: 10_000 })).errors;
    const max = await driveLoad({ call: counted, concurrency: MEASURE.concurrency, durationMs: MEASURE.durationMs, graceMs: 10_000 });
    measureErrors += max.errors;
    rate = Math.max(1, Math.round(max.decisionsPerSecond / 2));
    out.write(
      `maximum: ${Math.round(max.decisionsPerSecond).toLocaleString('en-US')} decisions/s (closed loop, ${MEASURE.concurrency} in flight, ` +
        `${MEASURE.durationMs / 1_000} s); holding ${rate.toLocaleString('en-US')}/s for ${options.loadMs / 60_000} min\n`,
    );
  }

  const load = new PacedLoad(caller.call, rate, 1_024);
  const loadSource = {
    phase: 'load' as const,
    decisions: () => measured + load.calls,
    sent: () => measureSent + load.sent,
    errors: () => measureErrors + load.errors,
    extra: () => (load.calls === 0 ? '' : `p99 ${load.percentileMs(99).toFixed(1)} ms`),
  };
  await sampler.sample(loadSource);
  sampler.start(loadSource, options.sampleMs);
  await sleep(options.loadMs);
  sampler.stop();
  await load.stop();
  await sampler.sample(loadSource);
  const longest = await longestTtlMs(redisClient);
  out.write(`load stopped; the longest TTL left is ${(longest / 1_000).toFixed(1)} s: idle until every key has expired\n`);

  const idleSource = { ...loadSource, phase: 'idle' as const, extra: () => '' };
  sampler.start(idleSource, options.sampleMs);
  const idleUntil = Date.now() + longest + IDLE_GRACE_MS;
  while (Date.now() < idleUntil && (sampler.samples.at(-1)?.phase !== 'idle' || sampler.samples.at(-1)?.keys !== 0)) await sleep(500);
  sampler.stop();
  await sampler.sample(idleSource);

  const died = service.exited() !== undefined;
  const exitCode = died ? undefined : await service.stop();
  const total = measured + load.calls;
  out.write(
    `\n${total.toLocaleString('en-US')} decisions (${load.calls.toLocaleString('en-US')} at ${Math.round(load.rate).toLocaleString('en-US')}/s of ` +
      `${rate.toLocaleString('en-US')}/s asked), ${load.allowed.toLocaleString('en-US')} allowed; latency p50 ${load.percentileMs(50).toFixed(1)} ms, ` +
      `p99 ${load.percentileMs(99).toFixed(1)} ms; service log lines ${JSON.stringify(Object.fromEntries(service.levels))}\n`,
  );
  for (const [message, count] of load.errorMessages) out.write(`  error x${count}: ${message}\n`);
  for (const line of service.complaints) out.write(`  service: ${line}\n`);

  const bars = judgeSoak({
    samples: sampler.samples,
    warmupMs: options.warmupMs,
    fixedKeys: USERS + 2 * TENANTS,
    memoWindowMs: REQUEST_ID_TTL_MS + options.sampleMs,
    staleShare: REDIS_STALE_SHARE,
    longestTtlMs: longest,
    idleGraceMs: IDLE_GRACE_MS,
    errors: measureErrors + load.errors,
    errorLines: (service.levels.get('error') ?? 0) + (service.levels.get('fatal') ?? 0),
    exitCode,
  });
  out.write(`\nverdict (warm-up ${options.warmupMs / 1_000} s):\n`);
  for (const bar of bars) out.write(`  ${bar.pass ? 'PASS' : 'FAIL'}  ${bar.name.padEnd(6)} ${bar.detail}\n`);
  return bars.every((bar) => bar.pass) ? 0 : 1;
}

benchMain(main);
