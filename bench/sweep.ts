// A closed-loop sweep: each kind at several concurrencies, kinds alternating at
// every step, so a slow spell of the shared machine hurts every kind alike. One
// sweep gives both figures the report plots: decisions/s against concurrency,
// and p50/p99 against the load each concurrency produced.
import type { AllowCaller } from './client.js';
import { driveLoad, type LoadResult } from './load.js';
import { ROUND_GRACE_MS } from './rounds.js';

export interface SweepKind {
  /** Short id used in the figures: "quota", "flexible", "fastify-native", ... */
  id: string;
  /** What a reader sees in tables and legends. */
  label: string;
  caller: AllowCaller;
}

export interface SweepPoint {
  kind: string;
  concurrency: number;
  round: number;
  decisionsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  calls: number;
  errors: number;
  firstError?: string | undefined;
}

export interface SweepPlan {
  kinds: readonly SweepKind[];
  concurrencies: readonly number[];
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  /** Told after each measured point (the bench prints it; the suite shows it as progress). */
  onPoint?: (point: SweepPoint) => void;
}

/** Warms each kind up at the highest concurrency, then measures round by round, concurrency by concurrency, kind by kind. */
export async function sweep(plan: SweepPlan): Promise<SweepPoint[]> {
  const top = Math.max(...plan.concurrencies);
  const load = (kind: SweepKind, concurrency: number, seconds: number): Promise<LoadResult> =>
    driveLoad({ call: kind.caller.call, concurrency, durationMs: seconds * 1000, graceMs: ROUND_GRACE_MS });
  if (plan.warmupSeconds > 0) for (const kind of plan.kinds) await load(kind, top, plan.warmupSeconds);

  const points: SweepPoint[] = [];
  for (let round = 1; round <= plan.rounds; round++) {
    for (const concurrency of plan.concurrencies) {
      for (const kind of plan.kinds) {
        const r = await load(kind, concurrency, plan.seconds);
        const point: SweepPoint = {
          kind: kind.id,
          concurrency,
          round,
          decisionsPerSecond: r.decisionsPerSecond,
          p50Ms: r.p50Ms,
          p95Ms: r.p95Ms,
          p99Ms: r.p99Ms,
          calls: r.calls,
          errors: r.errors,
          ...(r.firstError === undefined ? {} : { firstError: r.firstError }),
        };
        points.push(point);
        plan.onPoint?.(point);
      }
    }
  }
  return points;
}

/** The time a sweep takes, for the watchdog: warm-ups and every point with its grace. */
export function sweepBudgetMs(plan: Omit<SweepPlan, 'kinds'> & { kinds: number }, startupMs = 90_000): number {
  const points = plan.rounds * plan.concurrencies.length * plan.kinds;
  return startupMs + plan.kinds * plan.warmupSeconds * 1000 + points * (plan.seconds * 1000 + ROUND_GRACE_MS);
}

export function formatPointLine(point: SweepPoint, label: string): string {
  const errors = point.errors > 0 ? `  errors ${point.errors} (${point.firstError ?? ''})` : '';
  return (
    `round ${point.round} ${label.padEnd(30)} concurrency ${String(point.concurrency).padStart(4)}  ` +
    `${point.decisionsPerSecond.toFixed(0).padStart(7)} decisions/s  p50 ${point.p50Ms.toFixed(2)} ms  p99 ${point.p99Ms.toFixed(2)} ms${errors}`
  );
}
