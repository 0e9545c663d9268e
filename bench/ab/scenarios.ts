// What bench/ab/main.ts measures on one service instance in one round, each
// figure added to the comparison under the instance's side (A or B).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Redis } from 'ioredis';
import { processCpuMs, redisCpuMs } from '../cpu.js';
import { grpcFrame, h2loadClosedLoop } from '../h2load.js';
import { driveLoad } from '../load.js';
import { routeCaller } from '../route-caller.js';
import { UNARY_PATHS, unaryRequestOf } from '../unary-requests.js';
import type { Comparison } from './compare.js';
import type { Revision } from './revision.js';

/** bench/ab/caller.mjs, as copied into each built revision (so it imports that revision's quota client). */
export const CALLER = 'ab-caller.mjs';

/** A service process of one revision, and with `--http` the route server in front of it (that revision's HTTP adapter and client). */
export interface Instance {
  side: 'a' | 'b';
  revision: Revision;
  port: number;
  pid: number;
  route?: { port: number; pid: number };
}

/** CPU (ms) of the service, Redis and, when given, another process: sampled before and after a measured stretch. */
async function cpuNow(instance: Instance, redis: Redis, other?: number) {
  return { service: processCpuMs(instance.pid), redis: await redisCpuMs(redis), other: other === undefined ? 0 : processCpuMs(other) };
}

/** The stream figures of one instance at every concurrency: the revision's caller in a child process, CPU sampled around its measured seconds. */
export async function streamRound(instance: Instance, redis: Redis, options: { concurrencies: number[]; seconds: number }, into: Comparison): Promise<void> {
  const args = [join(instance.revision.dir, CALLER), String(instance.port), String(options.seconds), options.concurrencies.join(',')];
  const caller = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => caller.once('exit', resolve));
  let before = { service: 0, redis: 0 };
  for await (const line of createInterface({ input: caller.stdout! })) {
    const message = JSON.parse(line) as { start?: number; concurrency: number; decisionsPerSecond: number; p50Ms: number; callerCpuUs: number; calls: number };
    if (message.start !== undefined) {
      before = await cpuNow(instance, redis);
      continue;
    }
    const after = await cpuNow(instance, redis);
    const perCall = (ms: number) => (ms * 1000) / message.calls;
    const at = `stream ${message.concurrency} in flight`;
    into.add(`${at}: decisions/s`, true, instance.side, message.decisionsPerSecond);
    into.add(`${at}: p50 ms`, false, instance.side, message.p50Ms);
    into.add(`${at}: caller CPU µs/decision`, false, instance.side, message.callerCpuUs);
    into.add(`${at}: service CPU µs/decision`, false, instance.side, perCall(after.service - before.service));
    into.add(`${at}: Redis CPU µs/decision`, false, instance.side, perCall(after.redis - before.redis));
  }
  const code = await exited;
  if (code !== 0) throw new Error(`the caller of ${instance.revision.name} exited with ${String(code)}`);
}

const UNARY = {
  Allow: { path: UNARY_PATHS.Allow, frame: grpcFrame(unaryRequestOf.Allow('ab-user')) },
  ShouldRateLimit: { path: UNARY_PATHS.ShouldRateLimit, frame: grpcFrame(unaryRequestOf.ShouldRateLimit('ab-user')) },
} as const;

/** Unary figures of one instance by h2load: Allow's mean latency at 1 in flight; Allow and ShouldRateLimit at -c 4 -m 16. */
export async function unaryRound(instance: Instance, seconds: number, into: Comparison): Promise<void> {
  const url = (path: string) => `http://127.0.0.1:${instance.port}${path}`;
  const alone = await h2loadClosedLoop(url(UNARY.Allow.path), UNARY.Allow.frame, { clients: 1, streams: 1, seconds });
  into.add('unary Allow at 1 in flight: mean latency ms', false, instance.side, alone.meanLatencyMs);
  for (const [name, { path, frame }] of Object.entries(UNARY)) {
    const before = processCpuMs(instance.pid);
    const loaded = await h2loadClosedLoop(url(path), frame, { clients: 4, streams: 16, seconds });
    into.add(`unary ${name} -c 4 -m 16: calls/s`, true, instance.side, loaded.succeeded / seconds);
    into.add(`unary ${name} -c 4 -m 16: service CPU µs/call`, false, instance.side, ((processCpuMs(instance.pid) - before) * 1000) / loaded.succeeded);
  }
}

/**
 * POST /api/orders through the instance's route server at every concurrency,
 * one keep-alive connection per request in flight (bench/route-caller.ts), after
 * a second of warm-up: requests/s, p50, and CPU per request of the route, the
 * service and Redis.
 */
export async function httpRound(instance: Instance, redis: Redis, options: { concurrencies: number[]; seconds: number }, into: Comparison): Promise<void> {
  const route = instance.route!;
  for (const concurrency of options.concurrencies) {
    const caller = routeCaller(route.port, concurrency);
    try {
      await driveLoad({ call: caller.call, concurrency, durationMs: 1_000, graceMs: 5_000 });
      const before = await cpuNow(instance, redis, route.pid);
      const result = await driveLoad({ call: caller.call, concurrency, durationMs: options.seconds * 1_000, graceMs: 5_000 });
      const after = await cpuNow(instance, redis, route.pid);
      if (result.errors > 0) throw new Error(`${result.errors} requests to ${instance.revision.name}'s route failed, the first: ${result.firstError}`);
      const perRequest = (ms: number) => (ms * 1000) / result.calls;
      const at = `HTTP ${concurrency} in flight`;
      into.add(`${at}: requests/s`, true, instance.side, result.decisionsPerSecond);
      into.add(`${at}: p50 ms`, false, instance.side, result.p50Ms);
      into.add(`${at}: route CPU µs/request`, false, instance.side, perRequest(after.other - before.other));
      into.add(`${at}: service CPU µs/request`, false, instance.side, perRequest(after.service - before.service));
      into.add(`${at}: Redis CPU µs/request`, false, instance.side, perRequest(after.redis - before.redis));
    } finally {
      caller.close();
    }
  }
}
