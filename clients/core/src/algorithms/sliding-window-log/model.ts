import type { LimitOutcome } from '../outcome.js';
import { outcomeOf } from '../outcome.js';
import { windowMs as windowLength, type Window } from '../fixed-window/model.js';

export interface SlidingWindowLogParams {
  /** Whole units granted in any rolling window. */
  limit: number;
  window: Window;
}

export interface SlidingWindowLogStep {
  outcome: LimitOutcome;
  /** The log after the decision (ascending unix ms, one entry per unit), and its expiry. */
  write?: { log: number[]; ttlMs: number };
}

/**
 * Sliding window log as a pure function: `log` holds one timestamp per unit
 * accepted; the window is (now - window, now]. A request passes when the
 * units logged in the window plus its cost fit the limit; only then is it
 * logged (cost entries stamped now), so the log never holds more than `limit`
 * live entries and a denial stores nothing. Same steps as the Lua function.
 */
export function decideSlidingWindowLog(log: readonly number[] | undefined, params: SlidingWindowLogParams, cost: number, nowMs: number): SlidingWindowLogStep {
  const { limit } = params;
  const windowMs = windowLength(params.window);
  const live = (log ?? []).filter((at) => at > nowMs - windowMs);
  const count = live.length;
  const newest = live[count - 1];

  if (count + cost > limit) {
    // The entry whose expiry leaves room for `cost`.
    const freeing = live[count + cost - limit - 1] as number;
    return { outcome: outcomeOf(false, freeing + windowMs - nowMs, limit - count, resetAfter(newest, windowMs, nowMs)) };
  }
  if (cost === 0) return { outcome: outcomeOf(true, 0, limit - count, resetAfter(newest, windowMs, nowMs)) };
  const next = [...live, ...Array<number>(cost).fill(nowMs)].sort((a, b) => a - b);
  return {
    outcome: outcomeOf(true, 0, limit - count - cost, resetAfter(Math.max(newest ?? nowMs, nowMs), windowMs, nowMs)),
    write: { log: next, ttlMs: windowMs },
  };
}

/** Until the newest entry leaves the window; 0 for an empty log. */
function resetAfter(newest: number | undefined, windowMs: number, nowMs: number): number {
  return newest === undefined ? 0 : newest + windowMs - nowMs;
}

/**
 * Logs `cost` more entries stamped now without checking: the window may hold
 * more than the limit, never more than twice it. Returns the log to write
 * (entries that left the window dropped), or undefined for nothing to write.
 */
export function chargeSlidingWindowLog(
  log: readonly number[] | undefined,
  params: SlidingWindowLogParams,
  cost: number,
  nowMs: number,
): SlidingWindowLogStep['write'] {
  if (cost <= 0) return undefined;
  const windowMs = windowLength(params.window);
  const live = (log ?? []).filter((at) => at > nowMs - windowMs);
  const add = Math.min(cost, Math.max(0, 2 * params.limit - live.length));
  if (add <= 0) return undefined;
  return { log: [...live, ...Array<number>(add).fill(nowMs)].sort((a, b) => a - b), ttlMs: windowMs };
}

/** Removes `cost` entries stamped `spentAtMs` (what a spend then logged); an empty log is dropped (undefined). */
export function refundSlidingWindowLog(log: readonly number[], cost: number, spentAtMs: number): number[] | undefined {
  const next = [...log];
  for (let n = 0; n < cost; n++) {
    const at = next.lastIndexOf(spentAtMs);
    if (at === -1) break;
    next.splice(at, 1);
  }
  return next.length === 0 ? undefined : next;
}
