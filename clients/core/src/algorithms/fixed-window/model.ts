import type { LimitOutcome } from '../outcome.js';

/** Fixed windows are aligned to UTC calendar units, like Envoy's rate limit service. */
export const WINDOWS = {
  second: { ms: 1_000 },
  minute: { ms: 60_000 },
  hour: { ms: 3_600_000 },
  day: { ms: 86_400_000 },
} as const;

export type WindowName = keyof typeof WINDOWS;

/**
 * A window: a name, or a length in whole milliseconds (windows of any length,
 * aligned to the Unix epoch as the named ones are; Envoy's rate limit
 * configuration uses them for weeks, months of 30 days and years of 365).
 */
export type Window = WindowName | number;

/** The window's length in milliseconds. */
export function windowMs(window: Window): number {
  return typeof window === 'number' ? window : WINDOWS[window].ms;
}

export interface FixedWindowParams {
  /** Whole units granted per window. */
  limit: number;
  window: Window;
}

export interface FixedWindowStep {
  outcome: LimitOutcome;
  /** Units spent in the window after the decision; written only when allowed. */
  count: number;
  /** Expiry for a newly created counter: the end of its window. */
  ttlMs: number;
}

/** The counter's one key: `<identity key>:<window>`, e.g. rl:v1:per-user:user:{42}:minute (a length: `:<ms>ms`). */
export function fixedWindowKey(identityKey: string, window: Window): string {
  return typeof window === 'number' ? `${identityKey}:${window}ms` : `${identityKey}:${window}`;
}

/** What the counter key holds: the start of the window it counts (unix ms) and the units spent in it. */
export interface FixedWindowState {
  start: number;
  count: number;
}

/** The units spent in the window `nowMs` falls in: the stored count if it is that window's, else 0. */
export function fixedWindowCount(state: FixedWindowState | undefined, window: Window, nowMs: number): number {
  const ms = windowMs(window);
  return state !== undefined && state.start === nowMs - (nowMs % ms) ? state.count : 0;
}

/**
 * The fixed window decision as a pure function: `count` is the
 * counter of the window `nowMs` falls in (0 when absent). Same steps as the
 * Lua function.
 */
export function decideFixedWindow(count: number, params: FixedWindowParams, cost: number, nowMs: number): FixedWindowStep {
  const ms = windowMs(params.window);
  const resetAfterMs = ms - (nowMs % ms);
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
