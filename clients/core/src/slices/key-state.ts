import type { LimitCall } from '../types.js';

/**
 * What a slice holder knows of one limit and identity: how many decisions it
 * saw lately (whether the key is hot), and the slices it holds of it. The
 * holder (slice-holder.ts) keeps one per key and owns every change to it
 * beyond these steps.
 */

export interface Slice {
  /** Units taken. */
  taken: number;
  /** Units left to grant. */
  left: number;
  /** Local time after which it grants nothing. */
  expiresAt: number;
  timer: unknown;
}

export interface KeyState {
  call: LimitCall;
  /** Decisions seen in the current count window, which starts at windowStart and lasts the limit's ttl_ms. */
  seen: number;
  /** Decisions seen in the window before it. */
  seenBefore: number;
  windowStart: number;
  slice?: Slice;
  /** The rest of the slice before it, granted first; its record in the store is gone, so what it does not grant lapses. */
  tail?: Slice;
  /** A take or give-back of this key is on its way: no second one. */
  busy: boolean;
  /** The take on its way, settled once its slice (if any) is in place. */
  taking?: Promise<void>;
  /** After a failed take, no new one before this local time (a slice's ttl later). */
  quietUntil: number;
}

export function newKeyState(call: LimitCall, now: number): KeyState {
  return { call, seen: 0, seenBefore: 0, windowStart: now, busy: false, quietUntil: Number.NEGATIVE_INFINITY };
}

/** Counts one decision of the key at `now`, in count windows of the limit's ttl_ms. */
export function countDecision(state: KeyState, call: LimitCall, now: number): void {
  state.call = call;
  const ttl = call.limit.slices!.ttlMs;
  if (now - state.windowStart >= ttl) {
    state.seenBefore = now - state.windowStart >= 2 * ttl ? 0 : state.seen;
    state.seen = 0;
    state.windowStart = now - ((now - state.windowStart) % ttl);
  }
  state.seen++;
}

/** More than `threshold` decisions in the count window of `now` or the one before it. */
export function isHot(state: KeyState, now: number, threshold: number): boolean {
  const age = now - state.windowStart;
  const ttl = state.call.limit.slices!.ttlMs;
  if (age >= 2 * ttl) return false;
  if (age >= ttl) return state.seen > threshold;
  return state.seen > threshold || state.seenBefore > threshold;
}

/** Units the key's live slice and tail hold at `now` (a tail past its end or empty holds none). */
export function unitsLeft(state: KeyState, now: number): number {
  const { slice, tail } = state;
  const fromSlice = slice === undefined || now >= slice.expiresAt ? 0 : slice.left;
  const fromTail = tail === undefined || now >= tail.expiresAt ? 0 : tail.left;
  return fromSlice + fromTail;
}

/** Grants `cost` units the key holds (unitsLeft), from the tail first; what it holds after. */
export function grantUnits(state: KeyState, cost: number): number {
  const { slice, tail } = state;
  let rest = cost;
  if (tail !== undefined) {
    const fromTail = Math.min(tail.left, rest);
    tail.left -= fromTail;
    rest -= fromTail;
  }
  if (rest > 0) slice!.left -= rest;
  return (slice?.left ?? 0) + (tail?.left ?? 0);
}
