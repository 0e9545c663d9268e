// The steps bench/ab/main.ts measures. A step is one figure-set on one service
// instance; main runs each step on an instance of A and one of B back to back,
// and adds what it measured to the comparison under the instance's side.
import type { Redis } from 'ioredis';
import { type CpuSample, cpuBetween, processCpuMs, sampleCpu } from '../cpu.js';
import { type ProcessCounters, countersPer } from '../process-counters.js';
import { grpcFrame, h2loadClosedLoop } from '../h2load.js';
import { driveLoad } from '../load.js';
import { routeCaller } from '../route-caller.js';
import { UNARY_PATHS, unaryRequestOf } from '../unary-requests.js';
import type { Comparison } from './compare.js';
import type { Revision } from './revision.js';
import type { StreamCaller } from './stream-caller.js';

/**
 * A service process of one revision, the revision's quota client calling it,
 * and with `--http` the route server in front of it (that revision's HTTP adapter and client).
 */
export interface Instance {
  side: 'a' | 'b';
  revision: Revision;
  port: number;
  pid: number;
  /** The service's event-loop turns and heap allocations so far (undefined from a revision older than these counters). */
  counters(): Promise<ProcessCounters | undefined>;
  caller: StreamCaller;
  route?: { port: number; pid: number };
}

/** One thing measured on one instance. */
export interface Step {
  run(instance: Instance): Promise<void>;
}

/**
 * The order in which the `step`-th step of round `round` visits the pairs (A's
 * instance i and B's): pair by pair, so each side's i-th sample of a figure is
 * pair i's, and within a pair A first or B first, alternating from pair to pair
 * (A B B A ...) and from step to step and round to round, so that neither side
 * goes first more often, whatever going first or second does to a figure.
 */
export function visitOrder<T>(pairs: ReadonlyArray<readonly [T, T]>, round: number, step: number): T[] {
  return pairs.flatMap(([a, b], i) => ((i + round + step) % 2 === 0 ? [a, b] : [b, a]));
}

/**
 * The stream figures at one concurrency: the instance's caller, CPU and the
 * service's heap allocations sampled around its measured seconds.
 */
export function streamStep(concurrency: number, seconds: number, redis: Redis, into: Comparison): Step {
  return {
    async run(instance) {
      let before: CpuSample | undefined;
      let countersBefore: ProcessCounters | undefined;
      const result = await instance.caller.measure(concurrency, seconds, async () => {
        countersBefore = await instance.counters();
        before = await sampleCpu(instance.pid, redis);
      });
      const cpu = cpuBetween(before!, await sampleCpu(instance.pid, redis));
      const countersAfter = await instance.counters();
      const perCall = (ms: number) => (ms * 1000) / result.calls;
      const at = `stream ${concurrency} in flight`;
      into.add(`${at}: decisions/s`, true, instance.side, result.decisionsPerSecond);
      into.add(`${at}: p50 ms`, false, instance.side, result.p50Ms);
      into.add(`${at}: caller CPU µs/decision`, false, instance.side, result.callerCpuUs);
      into.add(`${at}: service CPU µs/decision`, false, instance.side, perCall(cpu.serverMs));
      into.add(`${at}: Redis CPU µs/decision`, false, instance.side, perCall(cpu.redisMs));
      if (countersBefore !== undefined && countersAfter !== undefined) {
        const { allocatedBytes } = countersPer(countersBefore, countersAfter, result.calls);
        into.add(`${at}: service heap bytes allocated/decision`, false, instance.side, allocatedBytes);
      }
    },
  };
}

const UNARY = {
  Allow: { path: UNARY_PATHS.Allow, frame: grpcFrame(unaryRequestOf.Allow('ab-user')) },
  ShouldRateLimit: { path: UNARY_PATHS.ShouldRateLimit, frame: grpcFrame(unaryRequestOf.ShouldRateLimit('ab-user')) },
} as const;

const unaryUrl = (instance: Instance, path: string) => `http://127.0.0.1:${instance.port}${path}`;

/** Unary Allow by h2load, one call at a time: its mean latency. */
export function unaryLatencyStep(seconds: number, into: Comparison): Step {
  return {
    async run(instance) {
      const alone = await h2loadClosedLoop(unaryUrl(instance, UNARY.Allow.path), UNARY.Allow.frame, { clients: 1, streams: 1, seconds });
      into.add('unary Allow at 1 in flight: mean latency ms', false, instance.side, alone.meanLatencyMs);
    },
  };
}

/** A unary method by h2load at -c 4 -m 16: calls/s, and the service's CPU and heap bytes allocated per call. */
export function unaryLoadStep(name: keyof typeof UNARY, seconds: number, into: Comparison): Step {
  const { path, frame } = UNARY[name];
  return {
    async run(instance) {
      const countersBefore = await instance.counters();
      const before = processCpuMs(instance.pid);
      const loaded = await h2loadClosedLoop(unaryUrl(instance, path), frame, { clients: 4, streams: 16, seconds });
      const cpuMs = processCpuMs(instance.pid) - before;
      const countersAfter = await instance.counters();
      const at = `unary ${name} -c 4 -m 16`;
      into.add(`${at}: calls/s`, true, instance.side, loaded.succeeded / seconds);
      into.add(`${at}: service CPU µs/call`, false, instance.side, (cpuMs * 1000) / loaded.succeeded);
      if (countersBefore !== undefined && countersAfter !== undefined) {
        const { allocatedBytes } = countersPer(countersBefore, countersAfter, loaded.succeeded);
        into.add(`${at}: service heap bytes allocated/call`, false, instance.side, allocatedBytes);
      }
    },
  };
}

/**
 * POST /api/orders through the instance's route server at one concurrency, one
 * keep-alive connection per request in flight (bench/route-caller.ts), after a
 * second of warm-up: requests/s, p50, and CPU per request of the route, the
 * service and Redis.
 */
export function httpStep(concurrency: number, seconds: number, redis: Redis, into: Comparison): Step {
  return {
    async run(instance) {
      const route = instance.route!;
      const caller = routeCaller(route.port, concurrency);
      try {
        await driveLoad({ call: caller.call, concurrency, durationMs: 1_000, graceMs: 5_000 });
        const before = await sampleCpu(instance.pid, redis);
        const routeBefore = processCpuMs(route.pid);
        const result = await driveLoad({ call: caller.call, concurrency, durationMs: seconds * 1_000, graceMs: 5_000 });
        const routeMs = processCpuMs(route.pid) - routeBefore;
        const cpu = cpuBetween(before, await sampleCpu(instance.pid, redis));
        if (result.errors > 0) throw new Error(`${result.errors} requests to ${instance.revision.name}'s route failed, the first: ${result.firstError}`);
        const perRequest = (ms: number) => (ms * 1000) / result.calls;
        const at = `HTTP ${concurrency} in flight`;
        into.add(`${at}: requests/s`, true, instance.side, result.decisionsPerSecond);
        into.add(`${at}: p50 ms`, false, instance.side, result.p50Ms);
        into.add(`${at}: route CPU µs/request`, false, instance.side, perRequest(routeMs));
        into.add(`${at}: service CPU µs/request`, false, instance.side, perRequest(cpu.serverMs));
        into.add(`${at}: Redis CPU µs/request`, false, instance.side, perRequest(cpu.redisMs));
      } finally {
        caller.close();
      }
    },
  };
}
