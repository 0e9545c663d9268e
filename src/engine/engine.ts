import type { LimitOutcome } from '../algorithms/algorithm.js';
import type { LimitCall } from '../algorithms/decide-script.js';
import type { Limit, Policy, PolicySet } from '../config/policies.js';
import { createLogger } from '../logger.js';
import { StoreFailurePolicy, type DecisionSource } from '../store/failure.js';
import type { QuotaStore } from '../store/store.js';
import { identityKey, requestKey } from './keys.js';
import { peekAcrossSlots, slotGroups, spendAcrossSlots, type SlotGroups } from './slot-groups.js';
import { validatePeek, validateRequest, type AllowInput, type PeekInput, type ValidRequest } from './validate-request.js';

export interface LimitStatus {
  name: string;
  algorithm: string;
  limit: number;
  remaining: number;
  resetAfterMs: number;
}

export interface Decision {
  allowed: boolean;
  /** 0 when allowed. */
  retryAfterMs: number;
  /** The limit that rejected the request; '' when allowed. */
  deniedBy: string;
  limits: LimitStatus[];
  /** Shaping: wait this long before doing the allowed work; 0 otherwise. */
  delayMs: number;
  /** Where the decision came from: the store, or the policy's failure mode (src/store/failure.ts). */
  source: DecisionSource;
}

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
    this.failure =
      options.failure ??
      new StoreFailurePolicy({ timeoutMs: 1_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
    this.onDecision = options.onDecision;
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
      const request = validateRequest(this.policies, input);
      const onDecision = this.onDecision;
      const started = onDecision === undefined ? 0 : performance.now();
      const limits = request.policy.limits;
      const calls = limitCalls(limits, request);
      // Computed once per request: the breaker's partition, the memo's place and the spend all follow it.
      const groups = slotGroups(this.store, calls);
      // The breaker of the partition the first reservation goes to (slot order, src/engine/slot-groups.ts).
      const firstKey = calls[groups[0]?.[0] ?? 0]?.identityKey ?? '';
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
        () => this.decideOn(this.store, request, limits, calls, groups),
        (store, scale) => {
          const scaled = limits.map(scale);
          const scaledCalls = limitCalls(scaled, request);
          return this.decideOn(store, request, scaled, scaledCalls, slotGroups(store, scaledCalls));
        },
        this.store.partitionOf?.(firstKey),
        after,
      );
    } catch (error) {
      return Promise.reject(error);
    }
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
  ): Promise<Omit<Decision, 'source'>> {
    // All or nothing: one store call when the keys share a slot (or the store has none), else reserve and refund.
    return spendAcrossSlots(store, calls, memoOf(request, groups), groups, (outcomes) => decisionOf(limits, outcomes));
  }

  /** GetQuota: every limit's status now, spending nothing and writing nothing. */
  async getQuota(input: PeekInput): Promise<LimitStatus[]> {
    const request = validatePeek(this.policies, input);
    const limits = request.policy.limits;
    return statuses(limits, await peekAcrossSlots(this.store, limitCalls(limits, request)));
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

/** The decision from each limit's outcome: the first rejecting limit denies, else the longest shaping delay applies. */
function decisionOf(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): Omit<Decision, 'source'> {
  let denied = -1;
  let delayMs = 0;
  for (let i = 0; i < limits.length; i++) {
    const outcome = outcomes[i];
    if (outcome?.allowed !== true) {
      denied = i;
      break;
    }
    if (outcome.delayMs !== undefined && outcome.delayMs > delayMs) delayMs = outcome.delayMs;
  }
  const allowed = denied === -1;
  return {
    allowed,
    retryAfterMs: allowed ? 0 : (outcomes[denied]?.retryAfterMs ?? 0),
    deniedBy: allowed ? '' : (limits[denied]?.name ?? ''),
    limits: statuses(limits, outcomes),
    delayMs: allowed ? delayMs : 0,
  };
}

/** With a request id: where its decision is remembered, beside the first group's identity (src/engine/slot-groups.ts). */
function memoOf(request: ValidRequest, groups: SlotGroups): { key: string; ttlMs: number } | undefined {
  if (request.requestId === '') return undefined;
  const first = groups[0]?.[0] ?? 0;
  const limit = request.policy.limits[first];
  const value = request.identityValues[first];
  if (limit === undefined || value === undefined) return undefined;
  return { key: requestKey(request.policy.name, limit.keyBy, value, request.requestId), ttlMs: request.policy.requestIdTtlMs };
}

function limitCalls(limits: readonly Limit[], request: ValidRequest): LimitCall[] {
  const calls: LimitCall[] = new Array(limits.length);
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    const value = request.identityValues[i];
    if (value === undefined) throw new Error(`policy ${request.policy.name}: no identity value for limit ${limit.name}`);
    calls[i] = { limit, identityKey: identityKey(limit.name, limit.keyBy, value), cost: request.cost };
  }
  return calls;
}

function statuses(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): LimitStatus[] {
  // A loop into a sized array, not map with a closure: once per decision.
  const out: LimitStatus[] = new Array(limits.length);
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    const outcome = outcomes[i];
    out[i] = {
      name: limit.name,
      algorithm: limit.algorithm.name,
      limit: limit.algorithm.capacity(limit.params),
      remaining: outcome?.remaining ?? 0,
      resetAfterMs: outcome?.resetAfterMs ?? 0,
    };
  }
  return out;
}
