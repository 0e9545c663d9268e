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
  /**
   * The set after an acquisition: expired leases dropped, and (allowed) the
   * new one added; its expiry (absent: kept). Absent when nothing changes.
   */
  write?: { leases: Map<string, number>; ttlMs?: number };
}

/**
 * Concurrency as a pure function, the same steps as the Lua function
 * (src/store/redis/script/concurrency/concurrency.lua). `cost` 0 is a peek; any
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
  const expired = (leases?.size ?? 0) - held;
  const next = new Map<string, number>();
  for (const [m, at] of leases ?? []) if (at > nowMs) next.set(m, at);
  if (held >= limit) {
    const freeing = live[held - limit] as number;
    const outcome = withExpired(outcomeOf(false, freeing - nowMs, limit - held, resetAfter), expired);
    return expired === 0 ? { outcome } : { outcome, write: { leases: next } };
  }
  const expiresAt = nowMs + leaseTtlMs;
  next.set(member, expiresAt);
  return {
    outcome: withExpired(outcomeOf(true, 0, limit - held - 1, leaseTtlMs), expired),
    // The set outlives its last lease by one lease_ttl_ms: a lease that expired is there for the next call to count.
    write: { leases: next, ttlMs: Math.max(expiresAt, last ?? 0) - nowMs + leaseTtlMs },
  };
}

/** `outcome` telling the leases that expired without a release and its write drops (LimitOutcome.leasesExpired), if any. */
function withExpired(outcome: LimitOutcome, expired: number): LimitOutcome {
  if (expired > 0) outcome.leasesExpired = expired;
  return outcome;
}

/** The expiries of the leases held at `nowMs`, ascending. */
export function liveExpiries(leases: LeaseSet | undefined, nowMs: number): number[] {
  const live: number[] = [];
  for (const at of leases?.values() ?? []) if (at > nowMs) live.push(at);
  return live.sort((a, b) => a - b);
}

/** A lease operation (Release, Renew) on one set: whether `member` was held, the set after it, and the expired leases that write drops. */
export interface LeaseOpStep {
  held: boolean;
  /** Absent when the set does not change; `leases` undefined: the set is left empty (deleted); `ttlMs` absent: it keeps its expiry. */
  write?: { leases: Map<string, number> | undefined; ttlMs?: number };
  /** Leases of the set that expired without a release, which `write` drops (0 without a write). */
  expired: number;
}

/** The leases of `leases` still held at `nowMs`, and how many had expired. */
function pruned(leases: LeaseSet, nowMs: number): { live: Map<string, number>; expired: number } {
  const live = new Map<string, number>();
  for (const [m, at] of leases) if (at > nowMs) live.set(m, at);
  return { live, expired: leases.size - live.size };
}

/**
 * Release: removes `member` and every expired lease (an expired `member`
 * among them, which was not held). The set keeps its expiry; an empty set
 * is deleted. Nothing to remove: nothing changes.
 */
export function releaseLease(leases: LeaseSet | undefined, member: string, nowMs: number): LeaseOpStep {
  if (leases === undefined) return { held: false, expired: 0 };
  const at = leases.get(member);
  const held = at !== undefined && at > nowMs;
  const { live, expired } = pruned(leases, nowMs);
  if (!held && expired === 0) return { held: false, expired: 0 };
  live.delete(member);
  return { held, write: { leases: live.size === 0 ? undefined : live }, expired };
}

/**
 * Renew: a held `member` now expires leaseTtlMs from now, the expired leases
 * go, and the set lives one lease_ttl_ms past its last lease. Not held:
 * nothing changes.
 */
export function renewLease(leases: LeaseSet | undefined, params: ConcurrencyParams, member: string, nowMs: number): LeaseOpStep {
  const at = leases?.get(member);
  if (leases === undefined || at === undefined || at <= nowMs) return { held: false, expired: 0 };
  const { live: next, expired } = pruned(leases, nowMs);
  next.set(member, nowMs + params.leaseTtlMs);
  let last = 0;
  for (const expiry of next.values()) if (expiry > last) last = expiry;
  return { held: true, write: { leases: next, ttlMs: last - nowMs + params.leaseTtlMs }, expired };
}

/** The refund of an acquisition made at `spentAtMs`: removes `member` if that acquisition gave it its expiry (a retry, which found it held, added nothing). */
export function refundConcurrency(leases: LeaseSet, params: ConcurrencyParams, member: string, spentAtMs: number): Map<string, number> | undefined {
  if (leases.get(member) !== spentAtMs + params.leaseTtlMs) return new Map(leases);
  const next = new Map(leases);
  next.delete(member);
  return next.size === 0 ? undefined : next;
}
