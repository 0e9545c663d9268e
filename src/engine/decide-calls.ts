import { decisionOf, type Decision, type LimitCall, type LimitOutcome, type Policy } from '@quota-service/core';
import type { QuotaStore } from '../store/store.js';
import type { StoreFailurePolicy } from './failure.js';
import { firstPartition, slotGroups, spendAcrossSlots } from './slot-groups.js';

/** decideCalls' answer. */
export interface CallsDecision {
  decision: Decision;
  /** Per call its outcome, when a store decided (source store or local); undefined under fail_open and fail_closed. */
  outcomes: readonly LimitOutcome[] | undefined;
}

/**
 * An ad hoc set of limits, each call with its own key and cost (Envoy's
 * rate limit service: one call per descriptor that matched a rule), decided
 * all or nothing like a policy's limits, with the store budget `timeoutMs`
 * (the default one when absent), the circuit breaker and `policy`'s failure
 * mode. `policy` names the set for the failure mode and metrics; its limits
 * are not read. Answers the decision and, when a store decided (the shared
 * one, or the local limiter), each call's outcome in the order of `calls`.
 * Validating the calls is the caller's job: every cost must be one its
 * limit can grant.
 */
export function decideCalls(
  store: QuotaStore,
  failure: StoreFailurePolicy,
  policy: Policy,
  given: readonly LimitCall[],
  timeoutMs?: number,
): Promise<CallsDecision> {
  try {
    const calls = withSlots(store, given);
    const limits = calls.map((call) => call.limit);
    const groups = slotGroups(store, calls);
    // The outcomes the decision was made of, per store: a late answer of the
    // shared store after its budget (the failure mode decided) is not read.
    let fromShared: readonly LimitOutcome[] | undefined;
    let fromLocal: readonly LimitOutcome[] | undefined;
    return failure.decide(
      policy,
      () =>
        spendAcrossSlots(store, calls, undefined, groups, (outcomes) => {
          fromShared = outcomes;
          return decisionOf(limits, outcomes);
        }),
      (local, scale) => {
        const scaled = calls.map((call) => ({ ...call, limit: scale(call.limit) }));
        return spendAcrossSlots(local, scaled, undefined, slotGroups(local, scaled), (outcomes) => {
          fromLocal = outcomes;
          return decisionOf(
            scaled.map((call) => call.limit),
            outcomes,
          );
        });
      },
      firstPartition(store, calls, groups),
      // Not told to onDecision (Allow's metrics): the door counts its own.
      (decision) => ({ decision, outcomes: decision.source === 'store' ? fromShared : decision.source === 'local' ? fromLocal : undefined }),
      timeoutMs,
    );
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Spends each call's cost without checking it against its limit (store mode
 * 'charge'): work that has happened must be counted even when it goes over
 * (the balance goes into debt, at most one limit deep). Each slot group is
 * charged on its own: nothing is decided, so nothing needs all or nothing.
 * Answers each call's status afterwards, in the order of `calls`; with the
 * store's budget `timeoutMs` and the circuit breaker, and
 * StoreUnavailableError when the store cannot answer.
 */
export function chargeCalls(store: QuotaStore, failure: StoreFailurePolicy, given: readonly LimitCall[], timeoutMs?: number): Promise<LimitOutcome[]> {
  try {
    const calls = withSlots(store, given);
    const groups = slotGroups(store, calls);
    const charge = () =>
      Promise.all(
        groups.map((group) =>
          store.decideAll(
            group.map((i) => calls[i]!),
            'charge',
          ),
        ),
      ).then((answers) => {
        const outcomes = new Array<LimitOutcome>(calls.length);
        for (let g = 0; g < groups.length; g++) {
          const group = groups[g]!;
          for (let j = 0; j < group.length; j++) outcomes[group[j]!] = answers[g]![j]!;
        }
        return outcomes;
      });
    return failure.peek(charge, firstPartition(store, calls, groups), timeoutMs);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * The calls with their hash slot (LimitCall.slot) on a store with slots: a
 * call across the slots of one master goes as one node batch only when its
 * calls carry their slots (decideArguments); without them it would be sent
 * as one script call over keys of several slots, which Redis Cluster refuses.
 */
function withSlots(store: QuotaStore, calls: readonly LimitCall[]): readonly LimitCall[] {
  if (store.slotOf === undefined) return calls;
  let out: LimitCall[] | undefined;
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    if (call.slot !== undefined) continue;
    const slot = store.slotOf(call.identityKey);
    if (slot === undefined) continue;
    out ??= calls.slice();
    out[i] = { ...call, slot };
  }
  return out ?? calls;
}
