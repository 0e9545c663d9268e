import {
  decisionOf,
  limitCalls,
  requestMemo,
  statuses,
  validatePeek,
  validateRequest,
  type AllowInput,
  type Decision,
  type GroupDecision,
  type Limit,
  type LimitCall,
  type LimitOutcome,
  type LimitStatus,
  type PeekInput,
  type Policy,
  type PolicySet,
  type SourcelessDecision,
  type ValidRequest,
} from '@quota-service/core';
import { createLogger } from '../logger.js';
import { StoreFailurePolicy } from './failure.js';
import type { QuotaStore } from '../store/store.js';
import { spendInPhases, type PhasedRequest } from './phased-spend.js';
import { peekAcrossSlots, slotGroups, spendAcrossSlots, type SlotGroups } from './slot-groups.js';

export interface QuotaEngineOptions {
  /** Timeout budget, circuit breaker and failure modes around the store call. */
  failure?: StoreFailurePolicy;
  /** Told of every decision and how long it took (metrics). */
  onDecision?: (policy: string, decision: Decision, seconds: number) => void;
}

/** The decision: policy -> limits -> keys -> store call -> result. Transport-free. */
export class QuotaEngine {
  readonly failure: StoreFailurePolicy;
  private readonly onDecision: QuotaEngineOptions['onDecision'];

  constructor(
    private policies: PolicySet,
    private readonly store: QuotaStore,
    options: QuotaEngineOptions = {},
  ) {
    // Without explicit settings (tests, embedding): a generous budget, so a
    // busy machine does not turn a slow answer into a failure-mode decision.
    this.failure = options.failure ?? new StoreFailurePolicy({ timeoutMs: 1_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
    this.onDecision = options.onDecision;
    this.failure.timeCallsOf(store);
  }

  /**
   * Decides one request. `map`, when given, turns the decision into what the
   * caller wants in the same step (a transport's reply, say), saving a promise
   * per decision over a `then` of the caller's own.
   */
  allow(input: AllowInput): Promise<Decision>;
  allow<R>(input: AllowInput, map: (decision: Decision) => R): Promise<R>;
  allow<R>(input: AllowInput, map?: (decision: Decision) => R): Promise<R | Decision> {
    // Not an async function (its suspended frame was a large share of a
    // decision's garbage, profiled), but as one: whatever throws here,
    // invalid input included, comes back as a rejection, never a throw.
    try {
      return this.decidePrepared(this.prepare(input), map);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * allow(input, map) for every request of a batch, answered together: per
   * request its result or the error allow() would have rejected with. The
   * store sees the requests in their order, all in this synchronous run (one
   * script call per turn on a single Redis node). Consecutive requests that
   * one store call decides (one slot group, no request id) are decided
   * together (StoreFailurePolicy.decideTogether): one store promise, deadline
   * and breaker step for them all, where allow() takes several promises per
   * request, the largest share of the service's CPU per batched decision
   * after the network (docs/benchmarks.md). Any other request, or all of them
   * while the breaker is not closed, is decided as allow() decides it.
   */
  allowEach<R>(inputs: readonly AllowInput[], map: (decision: Decision) => R): Promise<Array<PromiseSettledResult<R>>> {
    const results = new Array<PromiseSettledResult<R>>(inputs.length);
    const waits: Array<Promise<unknown>> = [];
    let run: Map<string | undefined, Indexed[]> | undefined;
    let phased: Map<string | undefined, Indexed[]> | undefined;
    for (let index = 0; index < inputs.length; index++) {
      let prepared: Prepared;
      try {
        prepared = this.prepare(inputs[index]!);
      } catch (error) {
        results[index] = { status: 'rejected', reason: error };
        continue;
      }
      if (prepared.request.requestId === '') {
        // One store call each, or (keys in several slots of a cluster) reserve and refund in phases.
        let together: Map<string | undefined, Indexed[]>;
        if (prepared.groups.length === 1) together = run ??= new Map();
        else together = phased ??= new Map();
        const partition = together.get(prepared.partition);
        if (partition === undefined) together.set(prepared.partition, [{ index, prepared }]);
        else partition.push({ index, prepared });
        continue;
      }
      // A request id: decided on its own (it remembers its decision), after the ones before it.
      if (run !== undefined) this.decideRun(run, false, map, results, waits);
      if (phased !== undefined) this.decideRun(phased, true, map, results, waits);
      run = phased = undefined;
      waits.push(this.settleInto(results, index, this.decidePrepared(prepared, map)));
    }
    if (run !== undefined) this.decideRun(run, false, map, results, waits);
    if (phased !== undefined) this.decideRun(phased, true, map, results, waits);
    return Promise.all(waits).then(() => results);
  }

  /**
   * Requests decided together per partition (allowEach): one store call each
   * (one decideGroups), or, `phased`, keys in several slots (spendInPhases).
   */
  private decideRun<R>(
    run: Map<string | undefined, Indexed[]>,
    phased: boolean,
    map: (decision: Decision) => R,
    results: Array<PromiseSettledResult<R>>,
    waits: Array<Promise<unknown>>,
  ): void {
    const onDecision = this.onDecision;
    const started = onDecision === undefined ? 0 : performance.now();
    for (const [partition, entries] of run) {
      const together = this.failure.decideTogether(
        phased
          ? () => spendInPhases(this.store, entries.map(phasedOf)).then((answers) => answers.map((answer, j) => decisionFromOutcomes(entries[j]!, answer)))
          : () => this.store.decideGroups(entries.map(callsOf), 'spend').then((answers) => answers.map((answer, j) => decisionFrom(entries[j]!, answer))),
        {
          count: entries.length,
          policy: (j) => entries[j]!.prepared.request.policy,
          onStore: (j, store, scale) => this.onStore(entries[j]!.prepared, store, scale),
          after: (j, decision) => {
            onDecision?.(entries[j]!.prepared.request.policy.name, decision, (performance.now() - started) / 1000);
            return map(decision);
          },
        },
        partition,
      );
      if (together === undefined) {
        // The breaker is not closed: each request waits for the probe (or its failure mode) as allow() does.
        for (const { index, prepared } of entries) waits.push(this.settleInto(results, index, this.decidePrepared(prepared, map)));
        continue;
      }
      waits.push(
        together.then((settled) => {
          for (let j = 0; j < settled.length; j++) results[entries[j]!.index] = settled[j]!;
        }),
      );
    }
  }

  private settleInto<R>(results: Array<PromiseSettledResult<R>>, index: number, result: Promise<R>): Promise<unknown> {
    return result.then(
      (value) => (results[index] = { status: 'fulfilled', value }),
      (reason: unknown) => (results[index] = { status: 'rejected', reason }),
    );
  }

  /** A request, validated, with its store calls, their slot groups and the partition its first reservation goes to. */
  private prepare(input: AllowInput): Prepared {
    const request = validateRequest(this.policies, input);
    const calls = limitCalls(request.policy.limits, request);
    // Computed once per request: the breaker's partition, the memo's place and the spend all follow it.
    const groups = slotGroups(this.store, calls);
    return { request, calls, groups, partition: firstPartition(this.store, calls, groups) };
  }

  private decidePrepared<R>(prepared: Prepared, map?: (decision: Decision) => R): Promise<R | Decision> {
    const { request, calls, groups } = prepared;
    const onDecision = this.onDecision;
    const started = onDecision === undefined ? 0 : performance.now();
    const after =
      onDecision === undefined
        ? map
        : (decision: Decision) => {
            onDecision(request.policy.name, decision, (performance.now() - started) / 1000);
            return map === undefined ? decision : map(decision);
          };
    // The store call starts synchronously from here (no await before it): the
    // requests of one AllowBatch reach the store in the same turn.
    return this.failure.decide(
      request.policy,
      // The shared store applies the policy's own limits: the calls built above serve as they are.
      () => this.decideOn(this.store, request, request.policy.limits, calls, groups),
      (store, scale) => this.onStore(prepared, store, scale),
      prepared.partition,
      after,
    );
  }

  /** The request on `store` with its limits scaled: the failure mode 'local'. */
  private onStore(prepared: Prepared, store: QuotaStore, scale: (limit: Limit) => Limit): Promise<SourcelessDecision> {
    const scaled = prepared.request.policy.limits.map(scale);
    const scaledCalls = limitCalls(scaled, prepared.request);
    return this.decideOn(store, prepared.request, scaled, scaledCalls, slotGroups(store, scaledCalls));
  }

  /**
   * The decision on one store; `limits` are the policy's limits as this store
   * applies them (the local limiter's share, or the limits themselves), `calls`
   * their store calls (limitCalls) and `groups` those calls' slot groups (slotGroups).
   */
  private decideOn(
    store: QuotaStore,
    request: ValidRequest,
    limits: readonly Limit[],
    calls: readonly LimitCall[],
    groups: SlotGroups,
  ): Promise<SourcelessDecision> {
    // All or nothing: one store call when the keys share a slot (or the store has none), else reserve and refund.
    return spendAcrossSlots(store, calls, requestMemo(request, groups[0]?.[0]), groups, (outcomes) => decisionOf(limits, outcomes));
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
  decideCalls(policy: Policy, calls: readonly LimitCall[], timeoutMs?: number): Promise<CallsDecision> {
    try {
      const limits = calls.map((call) => call.limit);
      const groups = slotGroups(this.store, calls);
      // The outcomes the decision was made of, per store: a late answer of the
      // shared store after its budget (the failure mode decided) is not read.
      let fromShared: readonly LimitOutcome[] | undefined;
      let fromLocal: readonly LimitOutcome[] | undefined;
      return this.failure.decide(
        policy,
        () =>
          spendAcrossSlots(this.store, calls, undefined, groups, (outcomes) => {
            fromShared = outcomes;
            return decisionOf(limits, outcomes);
          }),
        (store, scale) => {
          const scaled = calls.map((call) => ({ ...call, limit: scale(call.limit) }));
          return spendAcrossSlots(store, scaled, undefined, slotGroups(store, scaled), (outcomes) => {
            fromLocal = outcomes;
            return decisionOf(
              scaled.map((call) => call.limit),
              outcomes,
            );
          });
        },
        firstPartition(this.store, calls, groups),
        // Not told to onDecision (Allow's metrics): the door counts its own.
        (decision) => ({ decision, outcomes: decision.source === 'store' ? fromShared : decision.source === 'local' ? fromLocal : undefined }),
        timeoutMs,
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** GetQuota: every limit's status now, spending nothing and writing nothing. */
  async getQuota(input: PeekInput): Promise<LimitStatus[]> {
    const request = validatePeek(this.policies, input);
    const limits = request.policy.limits;
    const calls = limitCalls(limits, request);
    // The budget and breaker of decisions: an unreachable store answers UNAVAILABLE within the budget.
    const groups = slotGroups(this.store, calls);
    return statuses(limits, await this.failure.peek(() => peekAcrossSlots(this.store, calls, groups), firstPartition(this.store, calls, groups)));
  }

  /**
   * Hot reload: every call reads the policies through this one reference, so
   * a call sees either the old set or the new one whole, never a mix.
   */
  replacePolicies(policies: PolicySet): void {
    this.policies = policies;
  }

  listPolicies(): Policy[] {
    return [...this.policies.values()];
  }
}

/** QuotaEngine.decideCalls' answer. */
export interface CallsDecision {
  decision: Decision;
  /** Per call its outcome, when a store decided (source store or local); undefined under fail_open and fail_closed. */
  outcomes: readonly LimitOutcome[] | undefined;
}

/** A request ready for the store (QuotaEngine.prepare). */
interface Prepared {
  request: ValidRequest;
  calls: LimitCall[];
  groups: SlotGroups;
  /** Undefined on a store of one part. */
  partition: string | undefined;
}

/** A prepared request and its place in the batch (allowEach). */
interface Indexed {
  index: number;
  prepared: Prepared;
}

const callsOf = (entry: Indexed): LimitCall[] => entry.prepared.calls;
const phasedOf = (entry: Indexed): PhasedRequest => entry.prepared;

/** The partition the first reservation goes to (slot order, src/engine/slot-groups.ts): its breaker and budget apply. */
function firstPartition(store: QuotaStore, calls: readonly LimitCall[], groups: SlotGroups): string | undefined {
  return store.partitionOf?.(calls[groups[0]?.[0] ?? 0]?.identityKey ?? '');
}

/** The store's answer for one request decided together: its decision, or the error its call failed with. */
function decisionFrom(entry: Indexed, answer: GroupDecision | Error): SourcelessDecision | Error {
  return answer instanceof Error ? answer : decisionOf(entry.prepared.request.policy.limits, answer.outcomes);
}

/** The outcomes of one request decided in phases as its decision, or the error it failed with. */
function decisionFromOutcomes(entry: Indexed, answer: LimitOutcome[] | Error): SourcelessDecision | Error {
  return answer instanceof Error ? answer : decisionOf(entry.prepared.request.policy.limits, answer);
}
