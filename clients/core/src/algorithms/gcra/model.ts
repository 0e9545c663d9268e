import type { LimitOutcome } from '../outcome.js';
import { outcomeOf } from '../outcome.js';

/** The same parameters as a token bucket, and the same guarantees. */
export interface GcraParams {
  /** The largest burst, in units. */
  capacity: number;
  /** Units per second: the long-run pace. */
  refillPerSecond: number;
}

/**
 * Time is carried in floating-point ms at unix-epoch magnitude, where one
 * rounding step is about 0.24 µs; a request that overshoots the burst by at
 * most this much (10 µs of refill) still passes, so rounding can never deny
 * the last unit of a full burst. The schema caps the rate at 10,000/s, so the
 * slack is at most a tenth of a unit.
 */
export const GCRA_SLACK_MS = 0.01;

export interface GcraStep {
  outcome: LimitOutcome;
  /** The new theoretical arrival time and its expiry; absent when nothing is spent. */
  write?: { tat: number; ttlMs: number };
}

/**
 * Generic cell rate algorithm as a pure function. `tat` (theoretical arrival
 * time, unix ms) is when the limit would be full again; a request of `cost`
 * pushes it `cost` emission intervals later and passes if that stays within
 * `capacity` intervals of now. Same decisions as a token bucket with
 * tokens = capacity - (tat - now) / interval, in one number instead of two.
 */
export function decideGcra(tat: number | undefined, params: GcraParams, cost: number, nowMs: number): GcraStep {
  const interval = 1000 / params.refillPerSecond;
  const tau = params.capacity * interval;
  const backlog = Math.max(0, (tat ?? nowMs) - nowMs);
  const after = backlog + cost * interval;

  if (after - tau > GCRA_SLACK_MS) {
    // The first whole ms at which the overshoot is within the slack, i.e. when the request passes.
    return { outcome: outcomeOf(false, Math.ceil(after - tau - GCRA_SLACK_MS), remainingOf(params, backlog, interval), Math.ceil(backlog)) };
  }
  const outcome = outcomeOf(true, 0, remainingOf(params, after, interval), Math.ceil(after));
  return cost > 0 ? { outcome, write: { tat: nowMs + after, ttlMs: Math.ceil(after) } } : { outcome };
}

function remainingOf(params: GcraParams, backlog: number, interval: number): number {
  return Math.max(0, params.capacity - backlog / interval);
}

/**
 * Moves tat `cost` emission intervals later without checking, at most two
 * bursts ahead of now (a balance of -capacity). undefined (nothing to write)
 * for a cost of 0.
 */
export function chargeGcra(tat: number | undefined, params: GcraParams, cost: number, nowMs: number): { tat: number; ttlMs: number } | undefined {
  if (cost <= 0) return undefined;
  const interval = 1000 / params.refillPerSecond;
  const backlog = Math.max(0, (tat ?? nowMs) - nowMs);
  const after = Math.max(backlog, Math.min(backlog + cost * interval, 2 * params.capacity * interval));
  if (after <= 0) return undefined;
  return { tat: nowMs + after, ttlMs: Math.ceil(after) };
}

/**
 * Moves tat `cost` emission intervals back. Returns the tat to write,
 * 'delete' when the limit is full again, undefined when there is no key.
 */
export function refundGcra(tat: number | undefined, params: GcraParams, cost: number, nowMs: number): { tat: number; ttlMs: number } | 'delete' | undefined {
  if (tat === undefined) return undefined;
  const interval = 1000 / params.refillPerSecond;
  const next = tat - cost * interval;
  if (next - nowMs <= 0) return 'delete';
  return { tat: next, ttlMs: Math.ceil(next - nowMs) };
}
