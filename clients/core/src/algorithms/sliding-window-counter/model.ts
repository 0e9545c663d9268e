import type { LimitOutcome } from '../outcome.js';
import { outcomeOf } from '../outcome.js';
import { windowMs as windowLength, type Window } from '../fixed-window/model.js';

export interface SlidingWindowCounterParams {
  /** Whole units granted per (estimated) rolling window. */
  limit: number;
  window: Window;
}

/** The counters of the window that starts at `start` (unix ms) and of the one before it. */
export interface SlidingWindowCounterState {
  start: number;
  current: number;
  previous: number;
}

export interface SlidingWindowCounterStep {
  outcome: LimitOutcome;
  write?: { state: SlidingWindowCounterState; ttlMs: number };
}

/**
 * The estimate: estimated = current + previous * (1 - elapsed_fraction); a request
 * passes when estimated + cost <= limit. Windows are aligned to the unix epoch
 * (so to UTC). Computed scaled by the window length in ms, where every term
 * is a whole number (exact below 2^53, hence the schema's cap on `limit`), so
 * decisions and retry times are exact. Same steps as the Lua function.
 */
export function decideSlidingWindowCounter(
  state: SlidingWindowCounterState | undefined,
  params: SlidingWindowCounterParams,
  cost: number,
  nowMs: number,
): SlidingWindowCounterStep {
  const { limit } = params;
  const windowMs = windowLength(params.window);
  let start = nowMs - (nowMs % windowMs);
  let current = 0;
  let previous = 0;
  if (state !== undefined && state.start >= start) {
    // The same window, or a clock that stepped back: keep the later window's counts (stricter).
    start = state.start;
    current = state.current;
    previous = state.previous;
  } else if (state !== undefined && state.start === start - windowMs) {
    previous = state.current;
  }
  // estimated * windowMs
  const fading = previous * (windowMs - (nowMs - start));
  const scaled = current * windowMs + fading;

  if (scaled + cost * windowMs > limit * windowMs) {
    return {
      outcome: outcomeOf(
        false,
        retryAfter(limit, cost, current, previous, start, windowMs, nowMs),
        remainingOf(limit, scaled, windowMs),
        resetAfter(current, previous, start, windowMs, nowMs),
      ),
    };
  }
  current = current + cost;
  const outcome = outcomeOf(true, 0, remainingOf(limit, current * windowMs + fading, windowMs), resetAfter(current, previous, start, windowMs, nowMs));
  if (cost === 0) return { outcome };
  return { outcome, write: { state: { start, current, previous }, ttlMs: start + 2 * windowMs - nowMs } };
}

/** Whole units that would pass now. */
function remainingOf(limit: number, scaled: number, windowMs: number): number {
  return Math.max(0, Math.floor((limit * windowMs - scaled) / windowMs));
}

/** Until the estimate is 0: the end of the next window while this one has counts, else of this one. */
function resetAfter(current: number, previous: number, start: number, windowMs: number, nowMs: number): number {
  if (current > 0) return start + 2 * windowMs - nowMs;
  if (previous > 0) return start + windowMs - nowMs;
  return 0;
}

/**
 * The first ms at which the estimate leaves room for `cost`: later in this
 * window as the previous window's weight fades (previous * (W - m) <= room * W),
 * or else in the next window, where this window's count is the fading one.
 */
function retryAfter(limit: number, cost: number, current: number, previous: number, start: number, windowMs: number, nowMs: number): number {
  const room = limit - cost - current;
  if (room >= 0) return start + windowMs - Math.floor((room * windowMs) / previous) - nowMs;
  return start + 2 * windowMs - Math.floor(((limit - cost) * windowMs) / current) - nowMs;
}

/**
 * Counts `cost` more in the current window without checking: the estimate may
 * pass the limit, the current count never twice the limit. undefined (nothing
 * to write) for a cost of 0 or a count already that high.
 */
export function chargeSlidingWindowCounter(
  state: SlidingWindowCounterState | undefined,
  params: SlidingWindowCounterParams,
  cost: number,
  nowMs: number,
): SlidingWindowCounterStep['write'] {
  if (cost <= 0) return undefined;
  const windowMs = windowLength(params.window);
  let start = nowMs - (nowMs % windowMs);
  let current = 0;
  let previous = 0;
  if (state !== undefined && state.start >= start) {
    start = state.start;
    current = state.current;
    previous = state.previous;
  } else if (state !== undefined && state.start === start - windowMs) {
    previous = state.current;
  }
  const add = Math.min(cost, Math.max(0, 2 * params.limit - current));
  if (add <= 0) return undefined;
  return { state: { start, current: current + add, previous }, ttlMs: start + 2 * windowMs - nowMs };
}

/**
 * Takes `cost` back off the window the spend fell in: `current` while that
 * window is current, `previous` after one rollover, nothing later. Never below 0.
 */
export function refundSlidingWindowCounter(
  state: SlidingWindowCounterState,
  params: SlidingWindowCounterParams,
  cost: number,
  spentAtMs: number,
): SlidingWindowCounterState | undefined {
  const windowMs = windowLength(params.window);
  const spentStart = spentAtMs - (spentAtMs % windowMs);
  if (state.start === spentStart) return { ...state, current: Math.max(0, state.current - cost) };
  if (state.start === spentStart + windowMs) return { ...state, previous: Math.max(0, state.previous - cost) };
  return undefined;
}
