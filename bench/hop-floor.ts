// What one loopback hop costs on this machine, whatever is behind it: one
// request in flight to an echo server child (bench/servers/echo-server.ts), as
// a raw TCP round trip, a grpc-js unary call, and a message on one open
// grpc-js bidi stream (what the quota client's AllowStream rides on). The
// order API's latency target (bench/order-api-run.ts) is judged against these
// floors: the limiter adds one such hop, plus Redis's.
//
//   npx tsx bench/hop-floor.ts [--seconds 3] [--rounds 3] [--warmup 1]
import { parseArgs } from 'node:util';
import { cpus } from 'node:os';
import { benchMain, type BenchRun } from './bench-main.js';
import { startServerChild } from './children.js';
import { cpuBetween, sampleCpu } from './cpu.js';
import { grpcHops, tcpHop } from './hops.js';
import { driveLoad, type LoadResult } from './load.js';
import { median } from './stats.js';

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { seconds: { type: 'string', default: '3' }, rounds: { type: 'string', default: '3' }, warmup: { type: 'string', default: '1' } },
  });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const warmup = Number(values.warmup);
  run.watchdog(60_000 + 3 * (rounds * seconds + warmup + 2) * 1000);

  const tcp = await startServerChild('echo-tcp', 'echo-server.ts', ['tcp']);
  run.onCleanup(() => tcp.stop());
  const grpc = await startServerChild('echo-grpc', 'echo-server.ts', ['grpc']);
  run.onCleanup(() => grpc.stop());
  const hops = [await tcpHop(tcp.port, tcp.pid), ...grpcHops(grpc.port, grpc.pid)];
  run.onCleanup(async () => hops.forEach((h) => h.close()));

  process.stdout.write(
    `One request in flight to an echo child over loopback; ${rounds} rounds x ${seconds} s per kind; node ${process.version}, ${cpus().length} cpus\n\n`,
  );
  for (const hop of hops) await driveLoad({ call: hop.call, concurrency: 1, durationMs: warmup * 1000, graceMs: 5_000 });
  const results = new Map<string, Array<{ load: LoadResult; driverUs: number; serverUs: number }>>();
  for (let round = 1; round <= rounds; round++) {
    for (const hop of hops) {
      const before = await sampleCpu(hop.serverPid, undefined);
      const load = await driveLoad({ call: hop.call, concurrency: 1, durationMs: seconds * 1000, graceMs: 5_000 });
      const cpu = cpuBetween(before, await sampleCpu(hop.serverPid, undefined));
      const perCall = (ms: number) => (ms * 1000) / Math.max(1, load.calls);
      (results.get(hop.name) ?? results.set(hop.name, []).get(hop.name)!).push({ load, driverUs: perCall(cpu.driverMs), serverUs: perCall(cpu.serverMs) });
      process.stdout.write(`round ${round} ${hop.name.padEnd(11)} p50 ${load.p50Ms.toFixed(3)} ms  p99 ${load.p99Ms.toFixed(3)} ms  (${load.calls} calls)\n`);
      if (load.errors > 0) throw new Error(`${hop.name}: ${load.errors} calls failed: ${load.firstError ?? ''}`);
    }
  }
  const m = (name: string, pick: (r: { load: LoadResult; driverUs: number; serverUs: number }) => number) => median(results.get(name)!.map(pick));
  process.stdout.write(
    `\nmedians over ${rounds} rounds:\n| hop | calls/s | p50 (ms) | p95 (ms) | p99 (ms) | client µs/call | server µs/call |\n|---|--:|--:|--:|--:|--:|--:|\n`,
  );
  for (const hop of hops) {
    process.stdout.write(
      `| ${hop.name} | ${m(hop.name, (r) => r.load.decisionsPerSecond).toFixed(0)} | ${m(hop.name, (r) => r.load.p50Ms).toFixed(3)} | ${m(hop.name, (r) => r.load.p95Ms).toFixed(3)} | ` +
        `${m(hop.name, (r) => r.load.p99Ms).toFixed(3)} | ${m(hop.name, (r) => r.driverUs).toFixed(0)} | ${m(hop.name, (r) => r.serverUs).toFixed(0)} |\n`,
    );
  }
  return 0;
}

benchMain(main);
