// Child process of bench/ab/main.ts, copied into a built revision's directory so that
// `@quota-service/client` is that revision's: Allow through the quota client with
// its default batching (policy bench-window of bench/servers/bench-policies.ts,
// 10,000 users). It stays up for the whole run, so its client stays warm, and
// measures one step per line read on stdin, `<concurrency> <seconds>`: a closed
// loop for one second of warm-up, then for the given seconds. Per step it prints a
// JSON line as its measured seconds start, then one with decisions/s, p50 ms, and
// this process's CPU per decision in µs. Ends when stdin does.
//   node caller.mjs <port>
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { createQuotaClient } from '@quota-service/client';

const USERS = 10_000;
const [port] = process.argv.slice(2);
if (!/^\d+$/.test(port ?? '')) {
  process.stderr.write('usage: node caller.mjs <port>, then one "<concurrency> <seconds>" line per step on stdin\n');
  process.exit(2);
}

const client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 10_000, onUnavailable: 'fail_closed' });
const identities = Array.from({ length: USERS }, (_, i) => ({ user: `ab-user-${i}` }));
let next = 0;

async function loop(concurrency, ms) {
  const latencies = [];
  const end = performance.now() + ms;
  const worker = async () => {
    while (performance.now() < end) {
      const identity = identities[next];
      next = (next + 1) % USERS;
      const sent = performance.now();
      const decision = await client.allow({ policy: 'bench-window', identity });
      if (decision.source !== 'store') throw new Error(`decision from ${decision.source}, not the service`);
      latencies.push(performance.now() - sent);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { calls: latencies.length, elapsedMs: performance.now() - started, latencies };
}

for await (const step of createInterface({ input: process.stdin })) {
  const [concurrency, seconds] = step.split(' ').map(Number);
  if (!Number.isInteger(concurrency) || concurrency < 1 || !(seconds > 0)) throw new Error(`not a step: "${step}" (want "<concurrency> <seconds>")`);
  await loop(concurrency, 1_000);
  // The parent samples the service's and Redis's CPU on this line and on the result.
  process.stdout.write(`${JSON.stringify({ start: concurrency })}\n`);
  const cpu = process.cpuUsage();
  const { calls, elapsedMs, latencies } = await loop(concurrency, seconds * 1_000);
  const used = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  const line = {
    concurrency,
    decisionsPerSecond: (calls * 1000) / elapsedMs,
    p50Ms: latencies[Math.floor(latencies.length / 2)] ?? Number.NaN,
    callerCpuUs: (used.user + used.system) / calls,
    calls,
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}
await client.close();
