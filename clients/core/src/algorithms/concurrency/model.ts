import type { LimitOutcome } from '../outcome.js';
import { outcomeOf } from '../outcome.js';

export interface ConcurrencyParams {
  /** Leases held at once (a whole number, at least 1). */
  limit: number;
  /** How long a lease lives unless renewed, in ms. */
  leaseTtlMs: number;
}

/**
 * One identity's leases: member (the whole identity and the request id,
 * keys.ts leaseMember) -> the store time (unix ms) it expires at. A lease is
 * held while its expiry is after now; at its expiry it is free.
 */
export type LeaseSet = ReadonlyMap<string, number>;

export interface ConcurrencyStep {
  outcome: LimitOutcome;
  /** The set after an acquisition (expired leases dropped, the new one added) and its expiry; absent when nothing changes. */
  write?: { leases: Map<string, number>; ttlMs: number };
}

/**
 * Concurrency as a pure function, the same steps as the Lua function
 * (src/algorithms/concurrency/concurrency.lua). `cost` 0 is a peek; any
 * other cost asks for one lease, whatever its size. `member` already held:
 * the same lease (a retry), allowed, nothing changes. Else allowed while
 * fewer than `limit` are held, and then the set keeps only the live leases
 * and the new one, so it never holds more than `limit` live leases.
 *
 * Outcome: remaining = limit - held (below 0 when a lowered limit left more
 * held); reset_after_ms = for an allowed acquisition, when its lease expires
 * (AllowResponse.lease_expires_in_ms), else when the last lease held expires
 * (0 for none); retry_after_ms (a denial) = until enough leases expire to
 * free one, at the latest (a release frees one sooner).
 */
export function decideConcurrency(leases: LeaseSet | undefined, params: ConcurrencyParams, cost: number, member: string, nowMs: number): ConcurrencyStep {
  const { limit, leaseTtlMs } = params;
  const live = liveExpiries(leases, nowMs);
  const held = live.length;
  const last = live[held - 1];
  const resetAfter = last === undefined ? 0 : last - nowMs;
  if (cost === 0) return { outcome: outcomeOf(true, 0, limit - held, resetAfter) };
  const mine = leases?.get(member);
  if (mine !== undefined && mine > nowMs) return { outcome: outcomeOf(true, 0, limit - held, mine - nowMs) };
  if (held >= limit) {
    const freeing = live[held - limit] as number;
    return { outcome: outcomeOf(false, freeing - nowMs, limit - held, resetAfter) };
  }
  const next = new Map<string, number>();
  for (const [m, at] of leases ?? []) if (at > nowMs) next.set(m, at);
  const expiresAt = nowMs + leaseTtlMs;
  next.set(member, expiresAt);
  return {
    outcome: outcomeOf(true, 0, limit - held - 1, leaseTtlMs),
    write: { leases: next, ttlMs: Math.max(expiresAt, last ?? 0) - nowMs },
  };
}

/** The expiries of the leases held at `nowMs`, ascending. */
export function liveExpiries(leases: LeaseSet | undefined, nowMs: number): number[] {
  const live: number[] = [];
  for (const at of leases?.values() ?? []) if (at > nowMs) live.push(at);
  return live.sort((a, b) => a - b);
}

/** A lease operation (Release, Renew) on one set: whether `member` was held, and the set after it. */
export interface LeaseOpStep {
  held: boolean;
  /** Absent when the set does not change; `leases` undefined: the set is left empty (deleted); `ttlMs` absent: it keeps its expiry. */
  write?: { leases: Map<string, number> | undefined; ttlMs?: number };
}

/**
 * Release: removes `member` (held or expired: an expired one goes too, and
 * was not held). The set keeps its expiry; an empty set is deleted.
 */
export function releaseLease(leases: LeaseSet | undefined, member: string, nowMs: number): LeaseOpStep {
  const at = leases?.get(member);
  if (leases === undefined || at === undefined) return { held: false };
  const next = new Map(leases);
  next.delete(member);
  return { held: at > nowMs, write: { leases: next.size === 0 ? undefined : next } };
}

/**
 * Renew: a held `member` now expires leaseTtlMs from now, and the set lives
 * until its last lease expires. Not held: nothing changes.
 */
export function renewLease(leases: LeaseSet | undefined, params: ConcurrencyParams, member: string, nowMs: number): LeaseOpStep {
  const at = leases?.get(member);
  if (leases === undefined || at === undefined || at <= nowMs) return { held: false };
  const next = new Map(leases);
  next.set(member, nowMs + params.leaseTtlMs);
  let last = 0;
  for (const expiry of next.values()) if (expiry > last) last = expiry;
  return { held: true, write: { leases: next, ttlMs: last - nowMs } };
}

/** The refund of an acquisition made at `spentAtMs`: removes `member` if that acquisition gave it its expiry (a retry, which found it held, added nothing). */
export function refundConcurrency(leases: LeaseSet, params: ConcurrencyParams, member: string, spentAtMs: number): Map<string, number> | undefined {
  if (leases.get(member) !== spentAtMs + params.leaseTtlMs) return new Map(leases);
  const next = new Map(leases);
  next.delete(member);
  return next.size === 0 ? undefined : next;
}
