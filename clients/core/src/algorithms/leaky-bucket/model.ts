import type { LimitOutcome } from '../outcome.js';
import { outcomeOf } from '../outcome.js';

export const LEAKY_MODES = ['policing', 'shaping'] as const;
export type LeakyMode = (typeof LEAKY_MODES)[number];

export interface LeakyBucketParams {
  /** Units the bucket (policing) or queue (shaping) holds at most. */
  capacity: number;
  /** Units that leak out (are served) per second. */
  leakPerSecond: number;
  /** policing: over the rate is rejected; shaping: admitted work is told to wait its turn. */
  mode: LeakyMode;
}

export interface LeakyBucketState {
  /** Units in the bucket at ts. */
  level: number;
  /** Unix ms of the last update. */
  ts: number;
}

export interface LeakyBucketStep {
  outcome: LimitOutcome;
  write?: { state: LeakyBucketState; ttlMs: number };
}

/**
 * Leaky bucket as a pure function. The level drains at `leakPerSecond`; a
 * request of `cost` passes when it fits (level + cost <= capacity) and adds
 * to the level. Policing: that is all. Shaping: the level is a queue served
 * at the leak rate, so an admitted request must first wait for the units
 * ahead of it: delay = level * 1000 / rate (at most (capacity - cost) / rate,
 * the bounded queue). Same steps as the Lua function.
 */
export function decideLeakyBucket(state: LeakyBucketState | undefined, params: LeakyBucketParams, cost: number, nowMs: number): LeakyBucketStep {
  const { capacity, leakPerSecond: rate } = params;
  const prior = state ?? { level: 0, ts: nowMs };
  const elapsed = Math.max(0, nowMs - prior.ts);
  let level = Math.max(0, prior.level - (elapsed * rate) / 1000);

  if (level + cost > capacity) {
    const retryAfterMs = Math.ceil(((level + cost - capacity) * 1000) / rate);
    return { outcome: outcomeOf(false, retryAfterMs, capacity - level, Math.ceil((level * 1000) / rate)) };
  }
  const delayMs = params.mode === 'shaping' ? Math.ceil((level * 1000) / rate) : 0;
  level = level + cost;
  const outcome = outcomeOf(true, 0, capacity - level, Math.ceil((level * 1000) / rate), delayMs);
  if (cost === 0) return { outcome };
  return { outcome, write: { state: { level, ts: nowMs }, ttlMs: Math.ceil((level * 1000) / rate) } };
}

/**
 * Drains to now, then adds `cost` without checking: the level may pass the
 * capacity, never twice the capacity. undefined (nothing to write) for a cost of 0.
 */
export function chargeLeakyBucket(state: LeakyBucketState | undefined, params: LeakyBucketParams, cost: number, nowMs: number): LeakyBucketStep['write'] {
  if (cost <= 0) return undefined;
  const { capacity, leakPerSecond: rate } = params;
  const prior = state ?? { level: 0, ts: nowMs };
  let level = Math.max(0, prior.level - (Math.max(0, nowMs - prior.ts) * rate) / 1000);
  level = Math.max(level, Math.min(level + cost, 2 * capacity));
  if (level <= 0) return undefined;
  return { state: { level, ts: nowMs }, ttlMs: Math.ceil((level * 1000) / rate) };
}

/**
 * Drains to now, then takes `cost` back out, never below empty. Returns the
 * state to write, 'delete' for an empty bucket, undefined when there is none.
 */
export function refundLeakyBucket(
  state: LeakyBucketState | undefined,
  params: LeakyBucketParams,
  cost: number,
  nowMs: number,
): LeakyBucketStep['write'] | 'delete' | undefined {
  if (state === undefined) return undefined;
  const rate = params.leakPerSecond;
  let level = Math.max(0, state.level - (Math.max(0, nowMs - state.ts) * rate) / 1000);
  level = Math.max(0, level - cost);
  if (level <= 0) return 'delete';
  return { state: { level, ts: nowMs }, ttlMs: Math.ceil((level * 1000) / rate) };
}
