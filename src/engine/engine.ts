import {
  asError,
  decisionOf,
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
  type SettleInput,
  type SliceAnswer,
  type SliceHolder,
  type SourcelessDecision,
} from '@quota-service/core';
import { createLogger } from '../logger.js';
import type { DenialLog, Door } from './denial-log.js';
import { StoreFailurePolicy } from './failure.js';
import { isStaleOverrides, type OverrideView } from '../overrides/override.js';
import type { DecideStep, QuotaStore } from '../store/store.js';
import { type CallsDecision, chargeCalls, decideCalls } from './decide-calls.js';
import { peekQuota } from './peek-quota.js';
import { takeSlice, type TakeSliceInput } from './take-slice.js';
import { RequestDecider, reservable } from './request-decider.js';
import type { Indexed, Prepared } from './prepared.js';
import { type LeaseEvents, Leases, observeLeases } from './leases.js';
import { type SettlementEvent, settleReservation, type Settled } from './settle.js';

export interface QuotaEngineOptions {
  /** Timeout budget, circuit breaker and failure modes around the store call. */
  failure?: StoreFailurePolicy;
  /** Runtime overrides as this replica sees them (src/overrides); none when absent. */
  overrides?: OverrideView;
  /** Told of every decision and how long it took (metrics). */
  onDecision?: (policy: string, decision: Decision, seconds: number) => void;
  /** Told of leases acquired, renewed and released (metrics). */
  leaseEvents?: LeaseEvents;
  /**
   * Told of every new reservation (metrics): an allowed Allow with a
   * request_id, decided by the store (not a replay), on a policy with a limit
   * that counts units (reservable); `ttlMs`: how long its record lives.
   */
  onReserve?: (policy: string, ttlMs: number) => void;
  /**
   * Told of every Settle its reservation's record answered (metrics), as soon
   * as it answers; `reservation`: the policy is reservable (onReserve).
   */
  onSettle?: (policy: string, event: SettlementEvent, reservation: boolean) => void;
  /** Told of every denial, with the door it came through (a log line, bounded per policy: src/engine/denial-log.ts). */
  denials?: DenialLog;
  /**
   * This replica's slices of hot limits (docs/policies.md, "Slices"): an Allow
   * without a request id whose every limit has slices may be decided from
   * them, without a store call (source 'slice'). Absent: every decision asks the store.
   */
  slices?: SliceHolder;
}

/** The decision: policy -> limits -> keys -> store call -> result. Transport-free. */
export class QuotaEngine {
  readonly failure: StoreFailurePolicy;
  private readonly onDecision: QuotaEngineOptions['onDecision'];
  private readonly onSettle: QuotaEngineOptions['onSettle'];
  /** The denial log; Envoy's door writes its own denials to it too. */
  readonly denials: DenialLog | undefined;
  private readonly overrides: OverrideView | undefined;
  /** Release and Renew of concurrency leases (src/engine/leases.ts). */
  readonly leases: Leases;
  /** Requests decided with the limits as they apply to the identity now (src/engine/request-decider.ts). */
  private readonly decider: RequestDecider;
  private readonly slices: SliceHolder | undefined;

  constructor(
    private policies: PolicySet,
    private readonly store: QuotaStore,
    options: QuotaEngineOptions = {},
  ) {
    // Without explicit settings (tests, embedding): a generous budget, so a
    // busy machine does not turn a slow answer into a failure-mode decision.
    this.failure = options.failure ?? new StoreFailurePolicy({ timeoutMs: 1_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
    this.onDecision = options.onDecision;
    this.onSettle = options.onSettle;
    this.denials = options.denials;
    this.overrides = options.overrides;
    this.slices = options.slices;
    this.failure.timeCallsOf(store);
    this.leases = new Leases(() => this.policies, store, this.failure, this.overrides, options.leaseEvents);
    this.decider = new RequestDecider(store, this.overrides, () => this.policies, options.onReserve);
  }

  /**
   * Decides one request. `map`, when given, turns the decision into what the
   * caller wants in the same step (a transport's reply, say), saving a promise
   * per decision over a `then` of the caller's own.
   */
  allow(input: AllowInput): Promise<Decision>;
  allow<R>(input: AllowInput, map: (decision: Decision) => R, door?: Door): Promise<R>;
  allow<R>(input: AllowInput, map?: (decision: Decision) => R, door: Door = 'Allow'): Promise<R | Decision> {
    // Not an async function (a suspended frame per decision is garbage), but
    // as one: whatever throws here,
    // invalid input included, comes back as a rejection, never a throw.
    try {
      return this.decidePrepared(this.decider.prepare(input), map, door);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * allow(input, map) for every request of a batch, answered together: per
   * request its result or the error allow() would have rejected with. The
   * store sees the requests in their order, all in this synchronous run (one
   * script call per turn on a single Redis node). The requests without a
   * request id are decided together per part of the store
   * (StoreFailurePolicy.decideTogether): one store promise, deadline
   * and breaker step for them all, where allow() takes several promises per
   * request, the largest share of the service's CPU per batched decision
   * after the network (docs/benchmarks.md). Any other request, or all of them
   * while the breaker is not closed, is decided as allow() decides it.
   */
  allowEach<R>(inputs: readonly AllowInput[], map: (decision: Decision) => R, door: Door = 'AllowBatch'): Promise<Array<PromiseSettledResult<R>>> {
    const results = new Array<PromiseSettledResult<R>>(inputs.length);
    const waits: Array<Promise<unknown>> = [];
    let run: Map<string | undefined, Indexed[]> | undefined;
    for (let index = 0; index < inputs.length; index++) {
      let prepared: Prepared;
      try {
        prepared = this.decider.prepare(inputs[index]!);
      } catch (error) {
        results[index] = { status: 'rejected', reason: error };
        continue;
      }
      if (prepared.request.requestId === '' && !this.sliced(prepared)) {
        run ??= new Map();
        const partition = run.get(prepared.partition);
        if (partition === undefined) run.set(prepared.partition, [{ index, prepared }]);
        else partition.push({ index, prepared });
        continue;
      }
      // A request id (it remembers its decision), or a limit with slices (decided from
      // them when they can): on its own, after the ones before it.
      if (run !== undefined) this.decideRun(run, map, results, waits, door);
      run = undefined;
      waits.push(settledInto(results, index, this.decidePrepared(prepared, map, door)));
    }
    if (run !== undefined) this.decideRun(run, map, results, waits, door);
    return Promise.all(waits).then(() => results);
  }

  /** Requests decided together per partition (allowEach): one store call for each partition's requests. */
  private decideRun<R>(
    run: Map<string | undefined, Indexed[]>,
    map: (decision: Decision) => R,
    results: Array<PromiseSettledResult<R>>,
    waits: Array<Promise<unknown>>,
    door: Door,
  ): void {
    const onDecision = this.onDecision;
    const denials = this.denials;
    const started = onDecision === undefined ? 0 : performance.now();
    for (const [partition, entries] of run) {
      const together = this.failure.decideTogether(
        () => this.store.decide(entries.map(spendStepOf)).then((answers) => this.decisionsFrom(entries, answers)),
        {
          count: entries.length,
          policy: (j) => entries[j]!.prepared.request.policy,
          onLocalStore: (j, store, scale) => this.decider.onLocalStore(entries[j]!.prepared, store, scale),
          after: (j, decision) => {
            const { request, input } = entries[j]!.prepared;
            onDecision?.(request.policy.name, decision, (performance.now() - started) / 1000);
            if (!decision.allowed) denials?.denied(door, request.policy.name, decision.deniedBy, decision.source, input.identity);
            return map(decision);
          },
        },
        partition,
      );
      if (together === undefined) {
        // The breaker is not closed: each request waits for the probe (or its failure mode) as allow() does.
        for (const { index, prepared } of entries) waits.push(settledInto(results, index, this.decidePrepared(prepared, map, door)));
        continue;
      }
      waits.push(
        together.then((settled) => {
          for (let j = 0; j < settled.length; j++) results[entries[j]!.index] = settled[j]!;
        }),
      );
    }
  }

  /** Whether this replica may decide the request from its slices: every limit has them. */
  private sliced(prepared: Prepared): boolean {
    return this.slices !== undefined && prepared.calls.every((call) => call.limit.slices !== undefined);
  }

  /**
   * The answers of requests decided together (decideRun): each its decision,
   * or its error; a request the store found with a stale view of the overrides
   * is decided again on its own once they are read again (RequestDecider.refreshed).
   */
  private decisionsFrom(
    entries: readonly Indexed[],
    answers: Array<GroupDecision | Error>,
  ): Array<SourcelessDecision | Error> | Promise<Array<SourcelessDecision | Error>> {
    const decisions = new Array<SourcelessDecision | Error>(answers.length);
    let again: Array<Promise<unknown>> | undefined;
    for (let j = 0; j < answers.length; j++) {
      const answer = answers[j]!;
      const entry = entries[j]!;
      if (isStaleOverrides(answer)) {
        again ??= [];
        again.push(
          this.decider.refreshed(entry.prepared, answer).then(
            (decision) => (decisions[j] = decision),
            (error: unknown) => (decisions[j] = asError(error)),
          ),
        );
      } else if (answer instanceof Error) decisions[j] = answer;
      else decisions[j] = decisionOf(entry.prepared.limits, answer.outcomes);
    }
    return again === undefined ? decisions : Promise.all(again).then(() => decisions);
  }

  private decidePrepared<R>(prepared: Prepared, map: ((decision: Decision) => R) | undefined, door: Door): Promise<R | Decision> {
    const { request } = prepared;
    const onDecision = this.onDecision;
    const denials = this.denials;
    const started = onDecision === undefined ? 0 : performance.now();
    const after =
      onDecision === undefined && denials === undefined && request.requestId === ''
        ? map
        : (decision: Decision) => {
            onDecision?.(request.policy.name, decision, (performance.now() - started) / 1000);
            if (!decision.allowed) denials?.denied(door, request.policy.name, decision.deniedBy, decision.source, prepared.input.identity);
            if (decision.source === 'store')
              observeLeases(this.leases.events, request.policy.name, prepared.limits, prepared.calls, decision.limits, decision.leasesExpired);
            return map === undefined ? decision : map(decision);
          };
    // A hot limit's slice decides without the store; when it cannot grant, the store decides.
    const sliced = request.requestId === '' ? this.slices?.decide(prepared.calls) : undefined;
    if (sliced !== undefined) {
      const decision: Decision = { ...decisionOf(prepared.limits, sliced), source: 'slice' };
      return Promise.resolve(after === undefined ? decision : after(decision));
    }
    // The store call starts synchronously from here (no await before it): the
    // requests of one AllowBatch reach the store in the same turn.
    return this.failure.decide(
      request.policy,
      // The shared store applies the limits as they apply to this identity: the calls built above serve as they are.
      () => this.decider.decide(prepared),
      (store, scale) => this.decider.onLocalStore(prepared, store, scale),
      prepared.partition,
      after,
    );
  }

  /** Settle: gives back or charges the difference between a reservation's estimate and its actual cost, once (src/engine/settle.ts). */
  settle(input: SettleInput): Promise<Settled> {
    const onSettle = this.onSettle;
    const policy = this.policies.get(input.policy);
    const onRecord = onSettle === undefined || policy === undefined ? undefined : (event: SettlementEvent) => onSettle(policy.name, event, reservable(policy));
    return settleReservation(this.store, this.failure, this.policies, input, this.overrides, onRecord);
  }

  /** A holder's slice of one limit for one identity (QuotaService.TakeSlice, src/engine/take-slice.ts). */
  takeSlice(input: TakeSliceInput): Promise<SliceAnswer> {
    try {
      const prepared = this.decider.prepare({ policy: input.policy, identity: input.identity, cost: 0, requestId: '' });
      return takeSlice(this.store, prepared, input);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** An ad hoc set of limit calls decided all or nothing (decideCalls): Envoy's rate limit service. */
  decideCalls(policy: Policy, calls: readonly LimitCall[], timeoutMs?: number): Promise<CallsDecision> {
    return decideCalls(this.store, this.failure, policy, calls, timeoutMs, this.slices);
  }

  /** Limit calls spent without a check, into debt if need be (chargeCalls): Envoy's charges after the response. */
  chargeCalls(calls: readonly LimitCall[], timeoutMs?: number): Promise<LimitOutcome[]> {
    return chargeCalls(this.store, this.failure, calls, timeoutMs);
  }

  /** GetQuota: every limit's status now, spending nothing and writing nothing (peekQuota). */
  getQuota(input: PeekInput): Promise<LimitStatus[]> {
    const events = this.leases.events;
    const onRead =
      events === undefined
        ? undefined
        : (limits: readonly Limit[], calls: readonly LimitCall[], answer: readonly LimitStatus[]) =>
            observeLeases(events, input.policy, limits, calls, answer, 0);
    return peekQuota(this.policies, this.store, this.failure, this.overrides, input, onRead);
  }

  /** The policies in force now (the admin API validates against them). */
  get policySet(): PolicySet {
    return this.policies;
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

/** A request of a batch as the store's step: a spend, all or nothing. */
function spendStepOf(entry: Indexed): DecideStep {
  return { mode: 'spend', calls: entry.prepared.calls };
}

/** Puts `result`'s outcome, fulfilled or rejected, at `index` of `results`. */
function settledInto<R>(results: Array<PromiseSettledResult<R>>, index: number, result: Promise<R>): Promise<unknown> {
  return result.then(
    (value) => (results[index] = { status: 'fulfilled', value }),
    (reason: unknown) => (results[index] = { status: 'rejected', reason }),
  );
}
