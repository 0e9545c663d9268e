import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClientError, Status } from 'nice-grpc';
import type { Connection } from './connection.js';
import { callFailure, exitCodeOf } from './call-failure.js';
import type { CliError } from './exit-codes.js';
import { LatencyRecorder, type LatencySummary } from './latency-stats.js';

export interface BenchPlan {
  policy: string;
  /** Parts every request carries as given (e.g. tenant=acme). */
  fixed: Record<string, string>;
  /** The identity part that takes `users` different values. */
  userPart: string;
  users: number;
  concurrency: number;
  durationMs: number;
  /** Stop after this many calls; undefined = run for the duration. */
  requests: number | undefined;
  cost: number;
  /** How long calls still in flight at the end may take before they are cancelled. */
  graceMs: number;
}

export interface BenchProgress {
  elapsedMs: number;
  calls: number;
}

export interface BenchResult {
  durationMs: number;
  decisions: number;
  allowed: number;
  denied: number;
  /** Calls that got no decision, by gRPC status name. */
  errors: Record<string, number>;
  decisionsPerSecond: number;
  latencyMs: LatencySummary;
  /** True when Ctrl-C ended the run early. */
  interrupted: boolean;
}

/** How long a caller waits after a call that got no decision. */
const ERROR_PAUSE_MS = 20;

/** The value of the varying part for user `i`: names no real user is likely to have. */
export const benchUser = (i: number) => `quotactl-bench-${i}`;

/**
 * Load on one policy: `concurrency` callers, each sending the next Allow as
 * soon as the last is answered, round-robin over `users` identities, until the
 * duration (or the request count) is reached or `interrupt` fires. Answers
 * that mean "no decision now" (unavailable, overloaded, deadline) are counted;
 * any other error (unknown policy, refused token) stops the run and is thrown,
 * since every further call would fail the same way.
 */
export async function runBench(
  connection: Connection,
  plan: BenchPlan,
  interrupt: AbortSignal,
  onProgress: (progress: BenchProgress) => void,
): Promise<BenchResult> {
  const identities = Array.from({ length: plan.users }, (_, i) => ({ ...plan.fixed, [plan.userPart]: benchUser(i) }));
  // One look first, spending nothing: an unknown policy, a missing identity part, a
  // refused token or an unreachable service fails here, once, instead of as a storm of calls.
  await connection.call((call) => connection.client.getQuota({ policy: plan.policy, identity: identities[0]! }, call));
  const latencies = new LatencyRecorder();
  const errors: Record<string, number> = {};
  const inFlight = new AbortController();
  // Every call in flight listens on it: that many listeners is the design, not a leak.
  setMaxListeners(plan.concurrency + 10, inFlight.signal);
  let fatal: CliError | undefined;
  let calls = 0;
  let allowed = 0;
  let denied = 0;
  let stopped = false;
  let grace: NodeJS.Timeout | undefined;
  const stop = () => {
    stopped = true;
    grace ??= setTimeout(() => inFlight.abort(), plan.graceMs);
  };
  // Ctrl-C cancels what is in flight at once.
  const interrupted = () => inFlight.abort();
  const started = performance.now();
  const timer = setTimeout(stop, plan.durationMs);
  interrupt.addEventListener('abort', interrupted, { once: true });
  const ticker = setInterval(() => onProgress({ elapsedMs: performance.now() - started, calls }), 100);

  const worker = async () => {
    while (!stopped && !inFlight.signal.aborted && (plan.requests === undefined || calls < plan.requests)) {
      const identity = identities[calls % plan.users]!;
      calls++;
      const sent = performance.now();
      try {
        const response = await connection.client.allow(
          { policy: plan.policy, identity, cost: plan.cost, requestId: '' },
          { metadata: connection.metadata, signal: inFlight.signal },
        );
        latencies.add(performance.now() - sent);
        if (response.allowed) allowed++;
        else denied++;
      } catch (error) {
        if (inFlight.signal.aborted) return;
        if (!(error instanceof ClientError)) throw error;
        if (exitCodeOf(error.code) !== exitCodeOf(Status.UNAVAILABLE)) {
          // The same words as any command's refusal (the field as the option that sets it).
          fatal ??= callFailure(error, '', 0);
          stop();
          return;
        }
        const name = Status[error.code];
        errors[name] = (errors[name] ?? 0) + 1;
        // A service that went away fails calls at once: pause this caller rather than spin.
        await sleep(ERROR_PAUSE_MS);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: plan.concurrency }, worker));
  } finally {
    clearTimeout(timer);
    clearTimeout(grace);
    clearInterval(ticker);
    interrupt.removeEventListener('abort', interrupted);
    inFlight.abort();
  }
  if (fatal !== undefined) throw fatal;
  const durationMs = performance.now() - started;
  onProgress({ elapsedMs: durationMs, calls });
  const decisions = allowed + denied;
  return {
    durationMs,
    decisions,
    allowed,
    denied,
    errors,
    decisionsPerSecond: durationMs > 0 ? (decisions * 1000) / durationMs : 0,
    latencyMs: latencies.summary(),
    interrupted: interrupt.aborted,
  };
}
