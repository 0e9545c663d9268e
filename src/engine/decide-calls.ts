import { decisionOf, type Decision, type LimitCall, type LimitOutcome, type Policy, type SliceHolder } from '@quota-service/core';
import { decideOne, type QuotaStore } from '../store/store.js';
import type { StoreFailurePolicy } from './failure.js';

/** decideCalls' answer. */
export interface CallsDecision {
  decision: Decision;
  /** Per call its outcome, when a store or a slice decided (source store, local or slice); undefined under fail_open and fail_closed. */
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
  calls: readonly LimitCall[],
  timeoutMs?: number,
  slices?: SliceHolder,
): Promise<CallsDecision> {
  try {
    const limits = calls.map((call) => call.limit);
    // Every call's limit has slices and its slice grants it: decided here, without the store.
    const sliced = slices?.decide(calls);
    if (sliced !== undefined) return Promise.resolve({ decision: { ...decisionOf(limits, sliced), source: 'slice' }, outcomes: sliced });
    // The outcomes the decision was made of, per store: a late answer of the
    // shared store after its budget (the failure mode decided) is not read.
    let fromShared: readonly LimitOutcome[] | undefined;
    let fromLocal: readonly LimitOutcome[] | undefined;
    return failure.decide(
      policy,
      () =>
        decideOne(store, { mode: 'spend', calls }).then(({ outcomes }) => {
          fromShared = outcomes;
          return decisionOf(limits, outcomes);
        }),
      (local, scale) => {
        const scaled = calls.map((call) => ({ ...call, limit: scale(call.limit) }));
        return decideOne(local, { mode: 'spend', calls: scaled }).then(({ outcomes }) => {
          fromLocal = outcomes;
          return decisionOf(
            scaled.map((call) => call.limit),
            outcomes,
          );
        });
      },
      store.parts?.partitionOf(calls),
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
 * (the balance goes into debt, at most one limit deep).
 * Answers each call's status afterwards, in the order of `calls`; with the
 * store's budget `timeoutMs` and the circuit breaker, and
 * StoreUnavailableError when the store cannot answer.
 */
export function chargeCalls(store: QuotaStore, failure: StoreFailurePolicy, calls: readonly LimitCall[], timeoutMs?: number): Promise<LimitOutcome[]> {
  try {
    const charge = () => decideOne(store, { mode: 'charge', calls }).then(({ outcomes }) => outcomes);
    return failure.withoutFailureMode(charge, store.parts?.partitionOf(calls), timeoutMs);
  } catch (error) {
    return Promise.reject(error);
  }
}
