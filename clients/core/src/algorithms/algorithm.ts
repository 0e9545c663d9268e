import type { MemorySpace } from './memory-space.js';
import type { LimitOutcome } from './outcome.js';

/**
 * One limit decided but not yet written: the store checks every limit of a
 * request first, then commits all of them or none. `commit` is
 * absent when the decision changes nothing. A rejecting limit's commit never
 * spends (at most it stores the refill it computed), so a store may run it
 * even when the request as a whole is rejected.
 */
export interface Decided {
  outcome: LimitOutcome;
  commit?: () => void;
}

/**
 * One algorithm, two bodies: a Lua function the shared driver script runs in
 * Redis (src/store/redis/script/decide.lua) and a pure TypeScript model the embedded
 * store runs. Both take the same inputs and give the same outcome; property
 * tests hold them to that.
 */
export interface Algorithm<P> {
  /** Policy-file name, also the key of the Lua function in the driver's table. */
  readonly name: string;
  /** The function's `keys`, from the identity's key (../keys.ts). */
  scriptKeys(identityKey: string, params: P): string[];
  /**
   * The function's `args` (the driver passes `now` separately; in Lua, args that read as numbers arrive as numbers: read them with tonumber).
   * `lease`: a lease algorithm's member for the request (LimitCall.lease); the others ignore it.
   */
  scriptArgs(params: P, cost: number, lease?: string): string[];
  /** The same decision on the embedded store; writes nothing until `commit`. */
  decideInMemory(space: MemorySpace, identityKey: string, params: P, cost: number, nowMs: number, lease?: string): Decided;
  /**
   * Gives back what a spend of `cost` at `spentAtMs` took (driver mode
   * 'refund'), capped as the algorithm requires; the same as the Lua
   * function R.<name>. Writes at once.
   */
  refundInMemory(space: MemorySpace, identityKey: string, params: P, cost: number, nowMs: number, spentAtMs: number, lease?: string): void;
  /**
   * Spends `cost` without checking (driver mode 'charge'): work that must be
   * paid for even over the limit. The balance may go into debt, at most one
   * capacity deep, so later requests wait; the same as the Lua function
   * C.<name>. Writes at once. Absent for an algorithm that counts no units
   * (a lease): a charge and a settlement leave it alone.
   */
  chargeInMemory?(space: MemorySpace, identityKey: string, params: P, cost: number, nowMs: number): void;
  /** The most units the limit grants at once (AllowResponse LimitStatus.limit). */
  capacity(params: P): number;
  /** Why this limit can never grant `cost` (it is bad input), or undefined when it can. */
  rejectCost(params: P, cost: number): string | undefined;
  /**
   * The same limit with its numbers scaled by `share` (0 < share <= 1): what
   * one instance grants on its own under the `local` failure mode.
   */
  scaleParams(params: P, share: number): P;
  /**
   * Present for an algorithm that holds a lease per request id (concurrency):
   * an Allow on it needs a request id, which names the lease (LimitCall.lease),
   * and Release and Renew act on that lease (driver modes 'release', 'renew').
   */
  readonly lease?: LeaseOps<P>;
}

/** What a lease algorithm adds (Algorithm.lease). */
export interface LeaseOps<P> {
  /**
   * Release or Renew `member` on the embedded store: whether it was held, and
   * the leases that expired without a release which `commit` drops; writes
   * nothing until `commit` (as the Lua function L.<name>).
   */
  opInMemory(
    space: MemorySpace,
    identityKey: string,
    params: P,
    member: string,
    op: LeaseOp,
    nowMs: number,
  ): { held: boolean; commit?: () => void; expired: number };
  /** How long a lease lives unless renewed (RenewResponse.lease_expires_in_ms). */
  ttlMs(params: P): number;
}

export type LeaseOp = 'release' | 'renew';
