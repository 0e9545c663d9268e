import { LocalLimiter, type PolicySet } from '@quota-service/core';

/**
 * One answer a caller got during a fault scenario, in plain terms: where it
 * came from ('store', 'fail_open', 'fail_closed', 'local', or 'error' when
 * the call failed), and when (performance.now()).
 */
export interface Answer {
  readonly policy: string;
  readonly user: string;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly source: string;
  readonly allowed: boolean;
  /** The first limit's remaining, for store answers. */
  readonly remaining?: number;
  /** The gRPC status or message of a failed call. */
  readonly error?: string;
}

/** The value below which `p` (0..1) of the values fall; NaN with none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))]!;
}

export interface WindowFigures {
  readonly calls: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Answers by source. */
  readonly sources: Readonly<Record<string, number>>;
  /** Allowed answers: the load that reached what the limiter guards. */
  readonly allowed: number;
  /** Allowed answers per second of the window. */
  readonly allowedPerSecond: number;
}

/** Figures of the calls started in [from, to). */
export function windowFigures(answers: readonly Answer[], from: number, to: number): WindowFigures {
  const inside = answers.filter((a) => a.startedAt >= from && a.startedAt < to);
  const latencies = inside.map((a) => a.endedAt - a.startedAt);
  const sources: Record<string, number> = {};
  for (const a of inside) sources[a.source] = (sources[a.source] ?? 0) + 1;
  const allowed = inside.filter((a) => a.allowed).length;
  return {
    calls: inside.length,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: Math.max(0, ...latencies),
    sources,
    allowed,
    allowedPerSecond: allowed / ((to - from) / 1000),
  };
}

/**
 * How long after `healedAt` the store decides again for good: from the heal to
 * the end of the first store answer after which no answer (of calls started
 * after the heal) came from elsewhere. Undefined if the store never took over.
 */
export function recoveryMs(answers: readonly Answer[], healedAt: number): number | undefined {
  const after = answers.filter((a) => a.startedAt >= healedAt).sort((a, b) => a.endedAt - b.endedAt);
  let firstOfRun: Answer | undefined;
  for (const a of after) {
    if (a.source !== 'store') firstOfRun = undefined;
    else firstOfRun ??= a;
  }
  return firstOfRun === undefined ? undefined : firstOfRun.endedAt - healedAt;
}

export interface AuditFigures {
  /** Store answers checked (those that ended at or after `from`). */
  readonly checked: number;
  /** The store allowed what the model denied: quota granted twice. */
  readonly overGranted: number;
  /** The store denied what the model allowed: quota spent by calls whose answers came from elsewhere. */
  readonly underGranted: number;
  /** Same decision, different `remaining`: the store's state has drifted from what callers were told. */
  readonly drifted: number;
  /**
   * Units the store spent that no store answer accounts for, summed over users:
   * calls answered by a failure mode whose script still ran in Redis (it was on
   * its way when the call gave up). Per user the largest gap between the
   * model's remaining and the store's (once both run dry the gap closes again).
   */
  readonly ghostCharges: number;
}

/**
 * The store's answers against the reference model (the algorithm models of
 * @quota-service/core, in a LocalLimiter with the same policies): every store
 * answer of a user, in the order the user sent them, spends on the model, and
 * answers from a failure mode spend nothing there, as they spent nothing in the
 * store. One call at a time per user (paced-load.ts) keeps that order the
 * store's own. The policies must not depend on time within a run (a refill
 * too slow to add a unit), or the model's clock would have to be Redis's.
 * Answers that ended before `from` feed the model without being counted.
 */
export function auditAgainstModel(answers: readonly Answer[], policies: PolicySet, from: number): AuditFigures {
  const model = new LocalLimiter(policies, { clock: { now: () => clock } });
  let clock = 0;
  let checked = 0;
  let overGranted = 0;
  let underGranted = 0;
  let drifted = 0;
  const gap = new Map<string, number>();
  const ordered = [...answers].sort((a, b) => a.startedAt - b.startedAt);
  for (const answer of ordered) {
    if (answer.source !== 'store') continue;
    clock = performance.timeOrigin + answer.startedAt;
    const expected = model.allow({ policy: answer.policy, identity: { user: answer.user } });
    const modelRemaining = expected.limits[0]?.remaining;
    if (answer.remaining !== undefined && modelRemaining !== undefined) {
      const user = `${answer.policy}\u0000${answer.user}`;
      gap.set(user, Math.max(gap.get(user) ?? 0, Math.round(modelRemaining - answer.remaining)));
    }
    if (answer.endedAt < from) continue;
    checked++;
    if (answer.allowed && !expected.allowed) overGranted++;
    else if (!answer.allowed && expected.allowed) underGranted++;
    // Remaining is fractional (a token bucket refills continuously); a whole unit apart is a unit spent elsewhere.
    else if (answer.remaining !== undefined && Math.abs(answer.remaining - (expected.limits[0]?.remaining ?? Number.NaN)) >= 0.5) drifted++;
  }
  let ghostCharges = 0;
  for (const units of gap.values()) ghostCharges += Math.max(0, units);
  return { checked, overGranted, underGranted, drifted, ghostCharges };
}
