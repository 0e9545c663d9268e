// What one unary call costs the service, against a no-op grpc-js server of the
// same stack in the same run: server CPU per call under h2load (closed loop,
// `-c 4 -m 16`) and mean latency at 1 call in flight (`-c 1 -m 1`), for Allow
// and for a two-descriptor ShouldRateLimit (what Envoy sends), the service on
// one Redis, limits that never fill. h2load is written in C, so the driver's
// own pauses do not count as the servers'. Kinds alternate per round.
//
//   npx tsx bench/unary-cpu.ts [--seconds 3] [--rounds 3] [--warmup 1]
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startRedisServer } from '../test/support/redis-server.js';
import { rlsRequestBytes } from '../test/support/rls-client.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { startServerChild, type ServerChild } from './children.js';
import { processCpuMs } from './cpu.js';
import { grpcFrame, h2loadAvailable, h2loadClosedLoop } from './h2load.js';
import { median } from './stats.js';
import { UNARY_PATHS, type UnaryMethod, unaryRequestOf } from './unary-requests.js';

const REQUESTS: Record<UnaryMethod, Uint8Array> = {
  Allow: unaryRequestOf.Allow('bench-user-1'),
  ShouldRateLimit: rlsRequestBytes({
    domain: 'bench',
    descriptors: [{ entries: [{ key: 'user', value: 'bench-user-1' }] }, { entries: [{ key: 'user', value: 'bench-user-2' }] }],
  }),
};

interface Measured {
  cpuUsPerCall: number;
  callsPerSecond: number;
  meanLatencyMs: number;
}

/** Server CPU per call at full load, then mean latency one call at a time. */
async function measure(server: ServerChild, method: UnaryMethod, seconds: number): Promise<Measured> {
  const url = `http://127.0.0.1:${server.port}${UNARY_PATHS[method]}`;
  const body = grpcFrame(REQUESTS[method]);
  const before = processCpuMs(server.pid!);
  // A deadline as a proxy sends one (1 s: a store budget of 750 ms), so that a busy machine does not
  // turn decisions into failure-mode answers, which cost the service something else.
  const headers = ['grpc-timeout: 1S'];
  const loaded = await h2loadClosedLoop(url, body, { clients: 4, streams: 16, seconds, headers });
  const cpuMs = processCpuMs(server.pid!) - before;
  const single = await h2loadClosedLoop(url, body, { clients: 1, streams: 1, seconds: Math.max(1, Math.round(seconds / 2)), headers });
  if (loaded.failed > 0 || single.failed > 0) throw new Error(`${server.name} ${method}: ${loaded.failed + single.failed} calls failed`);
  return { cpuUsPerCall: (cpuMs * 1000) / loaded.succeeded, callsPerSecond: loaded.succeeded / seconds, meanLatencyMs: single.meanLatencyMs };
}

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({
    options: { seconds: { type: 'string', default: '3' }, rounds: { type: 'string', default: '3' }, warmup: { type: 'string', default: '1' } },
  });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  if (!h2loadAvailable()) {
    process.stderr.write('unary-cpu: h2load is not installed (make bench installs it: nghttp2-client)\n');
    return 1;
  }
  run.watchdog((rounds * 4 + 4) * (seconds * 2 + 5) * 1000 + 60_000);
  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const servers = {
    noop: await startServerChild('noop', 'noop-server.ts', []),
    service: await startServerChild('service', 'quota-server.ts', [redis.url]),
  };
  run.onCleanup(() => Promise.all(Object.values(servers).map((s) => s.stop())).then(() => undefined));
  process.stdout.write(
    `unary calls: the service on one Redis vs a no-op grpc-js server, h2load -c 4 -m 16 (CPU) and -c 1 -m 1 (latency), ` +
      `${rounds} alternating rounds x ${seconds} s; node ${process.version}, ${cpus().length} cpus, load average ${loadavg()[0]!.toFixed(2)}\n\n`,
  );
  const methods: UnaryMethod[] = ['Allow', 'ShouldRateLimit'];
  for (const method of methods) for (const server of Object.values(servers)) await measure(server, method, Number(values.warmup));
  const results: Record<string, Measured[]> = {};
  for (let round = 0; round < rounds; round++) {
    for (const method of methods) {
      for (const [name, server] of Object.entries(servers)) (results[`${name} ${method}`] ??= []).push(await measure(server, method, seconds));
    }
  }
  const summary = (key: string) => {
    const rows = results[key]!;
    return {
      cpu: median(rows.map((r) => r.cpuUsPerCall)),
      rate: median(rows.map((r) => r.callsPerSecond)),
      latency: median(rows.map((r) => r.meanLatencyMs)),
    };
  };
  process.stdout.write('method            server   CPU µs/call   calls/s   mean latency at 1 (ms)\n');
  for (const method of methods) {
    for (const name of Object.keys(servers)) {
      const s = summary(`${name} ${method}`);
      process.stdout.write(
        `${method.padEnd(17)} ${name.padEnd(8)} ${s.cpu.toFixed(1).padStart(11)} ${s.rate.toFixed(0).padStart(9)} ${s.latency.toFixed(3).padStart(12)}\n`,
      );
    }
    const noop = summary(`noop ${method}`);
    const service = summary(`service ${method}`);
    process.stdout.write(
      `${method}: CPU per call ${(service.cpu / noop.cpu).toFixed(2)}x the no-op's (goal <= 1.3), ` +
        `latency at 1 in flight ${(service.latency / noop.latency).toFixed(2)}x (goal <= 2)\n\n`,
    );
  }
  process.stdout.write(`load average after: ${loadavg()[0]!.toFixed(2)}\n`);
  return 0;
}

benchMain(main);
