import type { LimitOutcome } from '../algorithm.js';

/** Fixed windows are aligned to UTC calendar units, like Envoy's rate limit service. */
export const WINDOWS = {
  second: { ms: 1_000, stampDigits: 14 },
  minute: { ms: 60_000, stampDigits: 12 },
  hour: { ms: 3_600_000, stampDigits: 10 },
  day: { ms: 86_400_000, stampDigits: 8 },
} as const;

export type WindowName = keyof typeof WINDOWS;

export interface FixedWindowParams {
  /** Whole units granted per window. */
  limit: number;
  window: WindowName;
}

export interface FixedWindowStep {
  outcome: LimitOutcome;
  /** Units spent in the window after the decision; written only when allowed. */
  count: number;
  /** Expiry for a newly created counter: the end of its window. */
  ttlMs: number;
}

/** yyyymmddHHMM (minute) and its kin: the window start in UTC, as many digits as the window needs. */
export function windowStamp(window: WindowName, startMs: number): string {
  const digits = new Date(startMs).toISOString().replace(/[^0-9]/g, '');
  return digits.slice(0, WINDOWS[window].stampDigits);
}

/** Counter key of the window `nowMs` falls in: `<prefix>:<stamp of the window start>`. */
export function fixedWindowKey(keyPrefix: string, window: WindowName, nowMs: number): string {
  const windowMs = WINDOWS[window].ms;
  return `${keyPrefix}:${windowStamp(window, nowMs - (nowMs % windowMs))}`;
}

/**
 * The fixed window decision of spec 3.1 as a pure function: `count` is the
 * counter of the window `nowMs` falls in (0 when absent). Same steps as the
 * Lua function.
 */
export function decideFixedWindow(count: number, params: FixedWindowParams, cost: number, nowMs: number): FixedWindowStep {
  const windowMs = WINDOWS[params.window].ms;
  const resetAfterMs = windowMs - (nowMs % windowMs);
  if (count + cost > params.limit) {
    return { outcome: { allowed: false, retryAfterMs: resetAfterMs, remaining: params.limit - count, resetAfterMs }, count, ttlMs: resetAfterMs };
  }
  // A peek at an unused window: full, nothing to reset.
  if (count + cost === 0) return { outcome: { allowed: true, retryAfterMs: 0, remaining: params.limit, resetAfterMs: 0 }, count, ttlMs: resetAfterMs };
  return {
    outcome: { allowed: true, retryAfterMs: 0, remaining: params.limit - count - cost, resetAfterMs },
    count: count + cost,
    ttlMs: resetAfterMs,
  };
}
