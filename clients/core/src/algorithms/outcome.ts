import type { LimitOutcome } from '../types.js';

/** Outcome with `delayMs` only when there is a delay (see LimitOutcome.delayMs). */
export function outcomeOf(allowed: boolean, retryAfterMs: number, remaining: number, resetAfterMs: number, delayMs = 0): LimitOutcome {
  const outcome: LimitOutcome = { allowed, retryAfterMs, remaining, resetAfterMs };
  if (delayMs > 0) outcome.delayMs = delayMs;
  return outcome;
}
