/** The outcome of one limit for one request. */
export interface LimitOutcome {
  allowed: boolean;
  /** Milliseconds until a retry of the same cost could pass; 0 when allowed. */
  retryAfterMs: number;
  /** Units still available after this decision (may be fractional for a token bucket). */
  remaining: number;
  /** Milliseconds until the limit is fully replenished. */
  resetAfterMs: number;
  /**
   * Shaping only (leaky bucket in shaping mode): how long the caller should wait
   * before doing the allowed work. Left out when 0, so outcomes of the other
   * algorithms keep their four fields.
   */
  delayMs?: number;
  /**
   * A lease limit (concurrency): the leases that had expired without a
   * release and this call dropped from the set. Left out when 0. The driver
   * sends it as minus that in the delay's place (decide.lua).
   */
  leasesExpired?: number;
}

/** Outcome with `delayMs` only when there is a delay (see LimitOutcome.delayMs). */
export function outcomeOf(allowed: boolean, retryAfterMs: number, remaining: number, resetAfterMs: number, delayMs = 0): LimitOutcome {
  const outcome: LimitOutcome = { allowed, retryAfterMs, remaining, resetAfterMs };
  if (delayMs > 0) outcome.delayMs = delayMs;
  return outcome;
}

/**
 * An outcome from the driver's five fields of a limit (decide.lua); a delay
 * below 0 is a lease limit's expired leases dropped (LimitOutcome.leasesExpired).
 */
export function outcomeOfFields(allowed: number, retryAfterMs: number, remaining: number, resetAfterMs: number, delay: number): LimitOutcome {
  const outcome = outcomeOf(allowed === 1, retryAfterMs, remaining, resetAfterMs, delay);
  if (delay < 0) outcome.leasesExpired = -delay;
  return outcome;
}
