// The guard depends on one method of a quota client, a decision per call, and, for
// tools that reserve then settle or cap their calls in flight, on reserve() and acquire().
import type { QuotaDecider, QuotaLeaser, QuotaReserver } from '@quota-service/core';

export type {
  AllowParams,
  Decision as QuotaDecision,
  DecisionSource,
  LimitStatus as QuotaLimitStatus,
  QuotaDecider,
  QuotaReserver,
  QuotaLeaser,
  QuotaReservation as Reservation,
  QuotaSettlement as Settlement,
  QuotaSettlementStatus as SettlementStatus,
  Lease,
  LeaseRelease,
} from '@quota-service/core';

/** What the guard's `quota` option takes: allow() always; reserve() and acquire() when a tool needs them. */
export type GuardQuota = QuotaDecider & Partial<QuotaReserver & QuotaLeaser> & { listPolicies?(): Promise<string[]> };
