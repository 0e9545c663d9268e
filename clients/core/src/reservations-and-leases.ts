// The handles of work whose cost is known only afterwards (a reservation, settled
// with the real cost) and of work in progress (a concurrency lease). The quota
// client implements them; the HTTP and MCP guards depend only on these shapes.
import type { Decision, LimitStatus } from './types.js';

/** A reservation: spend `estimate` now, settle the real cost when the work is done. */
export interface ReserveParams {
  /** Policy name, e.g. "llm-tokens". */
  policy: string;
  /** Authenticated identity parts; never values the end client chose. */
  identity: Readonly<Record<string, string>>;
  /** Units the work is expected to cost, spent now as an Allow's cost (0 means 1). */
  estimate: number;
  /** The reservation's id (the Allow's request_id); default a random UUID. */
  requestId?: string;
}

/**
 * How a settlement ended:
 * - 'settled': the service gave back estimate - actual (or charged the excess) now;
 * - 'already_settled': an earlier settle() did; this one changed nothing;
 * - 'not_counted': the reservation was decided by the failure policy (the service
 *   was not asked), so the service holds nothing to settle;
 * - 'unavailable': the service could not be asked in time; the estimate stays
 *   spent (settle() may be called again until the reservation's record expires).
 */
export type QuotaSettlementStatus = 'settled' | 'already_settled' | 'not_counted' | 'unavailable';

export interface QuotaSettlement {
  status: QuotaSettlementStatus;
  /** The units reserved (the service's figure once it answered). */
  estimate: number;
  /** The actual cost that counts: the first settlement's. */
  actualCost: number;
  /** actualCost - estimate as applied to the limits: negative given back, positive charged; 0 when nothing was applied. */
  delta: number;
  /** Every limit's status after the settlement; [] when the service was not asked. */
  limits: LimitStatus[];
}

export interface QuotaReservation {
  /** The reservation's id: the Allow's request_id. */
  readonly requestId: string;
  /** The Allow's decision for the estimate. */
  readonly decision: Decision;
  /** decision.allowed: false means the work must not run (nothing to settle). */
  readonly allowed: boolean;
  /** The units reserved (an estimate of 0 reserves 1, as an Allow's cost). */
  readonly estimate: number;
  /**
   * Settles the reservation with what the work really cost (finite, >= 0). Safe to
   * call twice: the first settlement counts. Rejects only for caller bugs (a bad
   * `actual`, a denied or unknown reservation); an unreachable service resolves with
   * status 'unavailable'.
   */
  settle(actual: number): Promise<QuotaSettlement>;
}

/** A concurrency lease: one unit of work in progress under a `concurrency` limit. */
export interface AcquireParams {
  /** Policy name; it has a `concurrency` limit (and may have rate limits, decided all-or-nothing). */
  policy: string;
  identity: Readonly<Record<string, string>>;
  /** The lease's id (the Allow's request_id); default a random UUID. A retry with the same id is the same lease. */
  requestId?: string;
}

/** How release() ended: released by the service, or why not. */
export interface LeaseRelease {
  /**
   * 'released': the service freed the lease now; 'not_held': the service held no
   * such lease (expired, released before, lost); 'not_counted': the lease was never
   * counted by the service (not acquired, or granted by the failure policy);
   * 'unavailable': the service could not be asked in time: the lease is freed when
   * its TTL runs out on the store's clock.
   */
  status: 'released' | 'not_held' | 'not_counted' | 'unavailable';
}

export interface Lease extends AsyncDisposable {
  readonly requestId: string;
  /** The Allow's decision: allowed = acquired. */
  readonly decision: Decision;
  /** True when the lease was granted (decision.allowed). */
  readonly acquired: boolean;
  /** True from acquisition until release(), disposal or loss. */
  readonly held: boolean;
  /**
   * Aborted when the lease is lost (the service says it is no longer held, or it
   * could not be renewed before it expired), with a LeaseLostError as its reason.
   * Pass it to the work so the work stops: its cap no longer covers it.
   */
  readonly signal: AbortSignal;
  /** Stops the renewals and releases the lease. Safe to call twice; disposal calls it. */
  release(): Promise<LeaseRelease>;
}

/** A quota client that can reserve and settle (the quota client does). */
export interface QuotaReserver {
  reserve(params: ReserveParams): Promise<QuotaReservation>;
}

/** A quota client that can hold concurrency leases (the quota client does). */
export interface QuotaLeaser {
  /** `onUnavailable`: the answer when the service cannot decide (the quota client's default: 'fail_closed'). */
  acquire(params: AcquireParams, options?: { onUnavailable?: 'fail_open' | 'fail_closed' }): Promise<Lease>;
}
