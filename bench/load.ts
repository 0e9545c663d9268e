import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { percentile } from './stats.js';

/** One call of the thing under load; resolves to whether the decision was "allowed". */
export type Call = (signal: AbortSignal) => Promise<boolean>;

export interface LoadResult {
  /** Calls answered without error. */
  calls: number;
  /** Of those, how many were allowed (a denial is a normal answer, but not the path we mean to measure). */
  allowed: number;
  errors: number;
  firstError: string | undefined;
  /** From the first call sent to the last answer received, in ms. */
  elapsedMs: number;
  decisionsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
}

/**
 * Closed-loop load: `concurrency` workers each keep exactly one call in flight
 * and send the next as soon as the previous one answers, until `durationMs` has
 * passed. A closed loop measures the throughput the server sustains at that
 * concurrency without piling up a queue the way a fixed-rate (open) loop would
 * once the server falls behind. Calls still in flight at the deadline are
 * awaited and counted (elapsed time includes them); a hard stop `graceMs` later
 * aborts any stuck call so a round always ends.
 */
export async function driveLoad(options: { call: Call; concurrency: number; durationMs: number; graceMs: number }): Promise<LoadResult> {
  const latencies = new LatencyLog();
  let allowed = 0;
  let errors = 0;
  let firstError: string | undefined;

  const hardStop = new AbortController();
  // Every in-flight call listens on this one signal: that many listeners is by design, not a leak.
  setMaxListeners(options.concurrency + 10, hardStop.signal);
  const start = performance.now();
  const deadline = start + options.durationMs;
  const hardStopTimer = setTimeout(() => hardStop.abort(new Error('round overran its hard stop')), options.durationMs + options.graceMs);

  const worker = async () => {
    while (performance.now() < deadline && !hardStop.signal.aborted) {
      const sent = performance.now();
      try {
        if (await options.call(hardStop.signal)) allowed++;
        latencies.push(performance.now() - sent);
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
        // A failing server answers errors instantly; do not spin the CPU on them.
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
  };

  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } finally {
    clearTimeout(hardStopTimer);
  }
  const elapsedMs = performance.now() - start;

  const sorted = latencies.sorted();
  return {
    calls: sorted.length,
    allowed,
    errors,
    firstError,
    elapsedMs,
    decisionsPerSecond: sorted.length / (elapsedMs / 1000),
    p50Ms: percentile(sorted, 50),
    p95Ms: percentile(sorted, 95),
    p99Ms: percentile(sorted, 99),
  };
}

/** Per-call latencies in a growable typed array: no per-sample allocation while the load runs. */
class LatencyLog {
  private values = new Float64Array(1 << 16);
  private length = 0;

  push(ms: number): void {
    if (this.length === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = ms;
  }

  sorted(): Float64Array {
    return this.values.slice(0, this.length).sort();
  }
}
