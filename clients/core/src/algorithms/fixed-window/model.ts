import type { LimitOutcome } from '../outcome.js';

/** Fixed windows are aligned to UTC calendar units, like Envoy's rate limit service. */
export const WINDOWS = {
  second: { ms: 1_000 },
  minute: { ms: 60_000 },
  hour: { ms: 3_600_000 },
  day: { ms: 86_400_000 },
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

/** The counter's one key: `<identity key>:<window>`, e.g. rl:v1:per-user:user:{42}:minute. */
export function fixedWindowKey(identityKey: string, window: WindowName): string {
  return `${identityKey}:${window}`;
}

/** What the counter key holds: the start of the window it counts (unix ms) and the units spent in it. */
export interface FixedWindowState {
  start: number;
  count: number;
}

/** The units spent in the window `nowMs` falls in: the stored count if it is that window's, else 0. */
export function fixedWindowCount(state: FixedWindowState | undefined, window: WindowName, nowMs: number): number {
  const windowMs = WINDOWS[window].ms;
  return state !== undefined && state.start === nowMs - (nowMs % windowMs) ? state.count : 0;
}

/**
 * The fixed window decision as a pure function: `count` is the
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
