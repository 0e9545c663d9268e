import {
  FailedPreconditionError,
  NotFoundError,
  requestMemo,
  settlementMark,
  type LimitCall,
  type LimitOutcome,
  type LimitStatus,
  type Memo,
  type PolicySet,
  type SettleInput,
  type Settlement,
  type ValidRequest,
  statuses,
  StoreUnavailableError,
  validateSettle,
} from '@quota-service/core';
import type { OverrideView } from '../overrides/override.js';
import type { QuotaStore } from '../store/store.js';
import { appliedLimits } from './applied-limits.js';
import type { StoreFailurePolicy } from './failure.js';
import { firstPartition, slotGroups, type SlotGroups } from './slot-groups.js';

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
 * is charged actual - estimate, once. The memo's slot group is adjusted and
 * the memo marked settled in one script call (mode 'settle', decide.lua), so
 * concurrent or repeated settlements apply once. On a cluster each other
 * slot group follows with a refund or charge that sets a mark in its own
 * slot in the same script call (settlementMark) and does nothing where the
 * mark is set: every Settle, the first and any retry, sends them all, so a
 * retry completes the groups a failed call left and none is adjusted twice.
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
    const applied = appliedLimits(request, overrides, store);
    // Without the overrides' guard: a settlement adjusts by the parameters this replica applies now.
    const calls: LimitCall[] = applied.calls.map(({ limit, identityKey }) => ({ limit, identityKey, cost: 0 }));
    const groups = slotGroups(store, calls);
    const first = groups[0]?.[0] ?? 0;
    const memo = requestMemo(request, first);
    if (memo === undefined) throw new Error('a settlement needs a request id');
    const full: Memo = { ...memo, count: calls.length };
    return failure
      .peek(() => settleOn(store, request, calls, groups, full, actualCost, onRecord), firstPartition(store, calls, groups))
      .then(
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

/**
 * The settlement on the store: the memo's group in one call, then the other
 * groups (a cluster) in parallel, each adjusted once by its mark.
 */
async function settleOn(
  store: QuotaStore,
  request: ValidRequest,
  calls: readonly LimitCall[],
  groups: SlotGroups,
  memo: Memo,
  actualCost: number,
  onRecord: ((event: SettlementEvent) => void) | undefined,
): Promise<{ settlement: Settlement; outcomes: LimitOutcome[] }> {
  const pick = (group: readonly number[], cost = 0) => group.map((i) => ({ ...calls[i]!, cost }));
  const outcomes: LimitOutcome[] = new Array(calls.length);
  const place = (group: readonly number[], got: readonly LimitOutcome[]) => {
    for (let j = 0; j < group.length; j++) outcomes[group[j]!] = got[j]!;
  };
  const [first = [], ...rest] = groups;
  const decision = await store.decideGroup(pick(first), 'settle', { memo, actualCost, memoIndex: first[0] ?? 0 });
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
  if (settlement.spentAtMs.length !== calls.length) {
    // Settled (or not) on the first group only; the rest cannot be matched to what they spent.
    throw new FailedPreconditionError("request_id: the policy's limits changed since the reservation, so its other limits cannot be settled");
  }
  place(first, decision.outcomes);
  const delta = settlement.actualCost - settlement.estimate;
  onRecord?.({ alreadySettled: settlement.status === 'settled', delta, recordExpiresAtMs: (settlement.spentAtMs[first[0] ?? 0] ?? 0) + memo.ttlMs });
  await Promise.all(
    rest.map(async (group) => {
      const index = group[0]!;
      const mark = settlementMark(request, index);
      if (mark === undefined) throw new Error('a settlement needs a request id');
      // Sent by every Settle of this reservation, retries included: the mark makes it apply once.
      const got =
        delta === 0
          ? await store.decideGroup(pick(group), 'peek')
          : await store.decideGroup(pick(group, Math.abs(delta)), delta < 0 ? 'refund' : 'charge', {
              spentAtMs: settlement.spentAtMs[index]!,
              memo: { ...mark, count: group.length },
            });
      place(group, got.outcomes);
    }),
  );
  return { settlement, outcomes };
}
