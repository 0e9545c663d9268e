import {
  FailedPreconditionError,
  NotFoundError,
  type GroupDecision,
  type LimitCall,
  type LimitOutcome,
  type LimitStatus,
  type PolicySet,
  type SettleInput,
  type Settlement,
  statuses,
  StoreUnavailableError,
  validateSettle,
} from '@quota-service/core';
import type { OverrideView } from '../overrides/override.js';
import { decideOne, type QuotaStore } from '../store/store.js';
import { appliedLimits } from './applied-limits.js';
import type { StoreFailurePolicy } from './failure.js';
import { requestRecords } from './request-records.js';

/** A settlement's answer (SettleResponse). */
export interface Settled {
  /** The reservation's cost. */
  estimate: number;
  /** The actual cost of the settlement that counts (the first). */
  actualCost: number;
  /** actualCost - estimate: negative, given back; positive, charged. */
  delta: number;
  /** An earlier Settle had settled it: this call changed nothing. */
  alreadySettled: boolean;
  /** Every limit of the policy after the settlement. */
  limits: LimitStatus[];
}

/** A settlement as its reservation's record answered it: what the metrics count (QuotaEngineOptions.onSettle). */
export interface SettlementEvent {
  /** An earlier Settle had marked the record settled. */
  alreadySettled: boolean;
  /** actualCost - estimate of the settlement that counts. */
  delta: number;
  /** When the reservation's record expires (unix ms, store clock): its spend time + request_id_ttl_ms. */
  recordExpiresAtMs: number;
}

/**
 * Settles a reservation (an allowed Allow with a request_id, remembered for
 * the policy's request_id_ttl_ms): each limit gets back estimate - actual, or
 * is charged actual - estimate, once (the store's step 'settle': the record
 * is marked settled in the same atomic step as its limits are adjusted; on a
 * cluster each other slot's limits follow, each once by a mark of its own,
 * so a retry completes what a failed call left and none is adjusted twice).
 * The store's budget and breaker apply as to GetQuota: when the store
 * cannot answer, StoreUnavailableError (UNAVAILABLE); no failure mode
 * answers for it, since a settlement decides nothing. `onRecord` hears of
 * the record's answer (settled now, or before) as soon as it comes, whether
 * or not the other groups answer.
 */
export function settleReservation(
  store: QuotaStore,
  failure: StoreFailurePolicy,
  policies: PolicySet,
  input: SettleInput,
  overrides: OverrideView | undefined,
  onRecord?: (event: SettlementEvent) => void,
): Promise<Settled> {
  try {
    const { request, actualCost } = validateSettle(policies, input);
    const applied = appliedLimits(request, overrides);
    // Without the overrides' guard: a settlement adjusts by the parameters this replica applies now.
    const calls: LimitCall[] = applied.calls.map(({ limit, identityKey }) => ({ limit, identityKey, cost: 0 }));
    const records = requestRecords(request);
    if (records === undefined) throw new Error('a settlement needs a request id');
    const ttlMs = request.policy.requestIdTtlMs;
    const onRecordAnswer =
      onRecord === undefined
        ? undefined
        : (settlement: Settlement, recordSpentAtMs: number) =>
            onRecord({
              alreadySettled: settlement.status === 'settled',
              delta: settlement.actualCost - settlement.estimate,
              recordExpiresAtMs: recordSpentAtMs + ttlMs,
            });
    const settle = () =>
      decideOne(store, { mode: 'settle', calls, actualCost, records, onRecord: onRecordAnswer }).then((decision) => settledOrRefused(decision, calls.length));
    return failure.withoutFailureMode(settle, store.parts?.partitionOf(calls)).then(
      ({ settlement, outcomes }) => ({
        estimate: settlement.estimate,
        actualCost: settlement.actualCost,
        delta: settlement.actualCost - settlement.estimate,
        alreadySettled: settlement.status === 'settled',
        limits: statuses(applied.limits, outcomes),
      }),
      (error: unknown) => {
        // Answered as UNAVAILABLE (try again), but not the store's failure: no breaker counted it.
        throw error instanceof ReservationPending ? new StoreUnavailableError(error) : error;
      },
    );
  } catch (error) {
    return Promise.reject(error);
  }
}

/** A cross-slot reservation whose Allow is still being decided. */
class ReservationPending extends Error {
  override name = 'ReservationPending';
}

/** The store's answer to a settlement, or the reason the reservation cannot be settled. */
function settledOrRefused(decision: GroupDecision, limits: number): { settlement: Settlement; outcomes: LimitOutcome[] } {
  const settlement = decision.settlement;
  if (settlement === undefined) throw new Error('the store answered a settlement without one');
  switch (settlement.status) {
    case 'unknown':
      throw new NotFoundError("request_id: no reservation with this request_id for this policy and identity (never reserved, expired, or another identity's)");
    case 'denied':
      throw new FailedPreconditionError('request_id: its Allow was denied, so nothing was reserved to settle');
    case 'pending':
      throw new ReservationPending('the reservation is still being decided');
  }
  if (settlement.spentAtMs.length !== limits) {
    // Settled (or not) on the record's group only; the rest cannot be matched to what they spent.
    throw new FailedPreconditionError("request_id: the policy's limits changed since the reservation, so its other limits cannot be settled");
  }
  return { settlement, outcomes: decision.outcomes };
}
