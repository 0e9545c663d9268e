import {
  firstLeaseLimit,
  type Limit,
  type LeaseInput,
  LeaseNotHeldError,
  type LimitCall,
  type LimitOutcome,
  type LimitStatus,
  type PolicySet,
  statuses,
  validateLease,
  type ValidRequest,
} from '@quota-service/core';
import type { OverrideView } from '../overrides/override.js';
import { decideOne, type QuotaStore } from '../store/store.js';
import { appliedLimits } from './applied-limits.js';
import type { StoreFailurePolicy } from './failure.js';

/**
 * What the store said of leases (metrics: src/metrics/lease-metrics.ts): a
 * reading of one identity's lease set, the set of the policy's first
 * concurrency limit (every lease of the policy is in it), taken by an Allow
 * the store decided, a Release, a Renew or a GetQuota.
 */
export interface LeaseEvents {
  /**
   * `set` (its key) holds `held` leases now; this call dropped `expired`
   * leases that had expired without a release. Every lease read expires
   * within `ttlMs` (lease_ttl_ms) unless renewed.
   */
  observed(policy: string, set: string, held: number, expired: number, ttlMs: number): void;
}

/**
 * Tells `events` of the reading of `limits`' first lease limit, if any: held
 * from its status in `answer` (limit - remaining), expired from its outcome
 * in `dropped`, or `dropped` itself (a decision's leasesExpired).
 */
export function observeLeases(
  events: LeaseEvents | undefined,
  policy: string,
  limits: readonly Limit[],
  calls: readonly LimitCall[],
  answer: readonly LimitStatus[],
  dropped: readonly LimitOutcome[] | number | undefined,
): void {
  if (events === undefined) return;
  const index = firstLeaseLimit(limits);
  if (index === -1) return;
  const limit = limits[index]!;
  const call = calls[index];
  const status = answer[index];
  if (call === undefined || status === undefined) return;
  const expired = typeof dropped === 'object' ? (dropped[index]?.leasesExpired ?? 0) : (dropped ?? 0);
  events.observed(policy, call.identityKey, status.leasesHeld, expired, limit.algorithm.lease!.ttlMs(limit.params));
}

/** Release's answer: whether the lease was held, and every limit's status after. */
export interface ReleaseResult {
  released: boolean;
  limits: LimitStatus[];
}

/**
 * Release and Renew of the concurrency leases an Allow with a request id
 * acquired (docs/policies.md, "Concurrency leases"). Each slot group of the
 * policy's limits is one script call (driver modes 'release' and 'renew'),
 * within the decision's budget and behind its circuit breaker; when the
 * store cannot be asked the call fails UNAVAILABLE, whatever the policy's
 * failure mode: a lease lives in the store, so only the store can end or
 * extend it.
 */
export class Leases {
  constructor(
    private readonly policies: () => PolicySet,
    private readonly store: QuotaStore,
    private readonly failure: StoreFailurePolicy,
    private readonly overrides: OverrideView | undefined,
    readonly events: LeaseEvents | undefined,
  ) {}

  /** Ends the lease: released = false when it was not held (never acquired, released, or expired), and nothing changed. */
  release(input: LeaseInput): Promise<ReleaseResult> {
    return this.step(input, 'release').then(({ request, limits, calls, outcomes }) => {
      let released = false;
      for (let i = 0; i < calls.length; i++) if (calls[i]!.lease !== undefined && outcomes[i]!.allowed) released = true;
      const answer = statuses(limits, outcomes);
      this.observe(request, limits, calls, answer, outcomes);
      return { released, limits: answer };
    });
  }

  /** Extends the lease to lease_ttl_ms from now (store clock): answers that, in ms; LeaseNotHeldError (NOT_FOUND) when it is no longer held. */
  renew(input: LeaseInput): Promise<number> {
    return this.step(input, 'renew').then(({ request, limits, calls, outcomes }) => {
      this.observe(request, limits, calls, statuses(limits, outcomes), outcomes);
      let expiresInMs = 0;
      for (let i = 0; i < calls.length; i++) {
        const { limit, lease } = calls[i]!;
        if (lease === undefined) continue;
        if (!outcomes[i]!.allowed) throw new LeaseNotHeldError(request.policy.name);
        const ttl = limit.algorithm.lease!.ttlMs(limit.params);
        if (expiresInMs === 0 || ttl < expiresInMs) expiresInMs = ttl;
      }
      return expiresInMs;
    });
  }

  /** What the store said of the policy's leases (LeaseEvents): `answer`, each limit's status after the call; `outcomes`, what it dropped. */
  private observe(
    request: ValidRequest,
    limits: readonly Limit[],
    calls: readonly LimitCall[],
    answer: readonly LimitStatus[],
    outcomes: readonly LimitOutcome[],
  ): void {
    observeLeases(this.events, request.policy.name, limits, calls, answer, outcomes);
  }

  private step(
    input: LeaseInput,
    mode: 'release' | 'renew',
  ): Promise<{ request: ValidRequest; limits: readonly ValidRequest['limits'][number][]; calls: LimitCall[]; outcomes: LimitOutcome[] }> {
    try {
      const request = validateLease(this.policies(), input);
      const applied = appliedLimits(request, this.overrides);
      // Without the overrides' guard: the parameters only give a renewal its lease_ttl_ms, and the member is what counts.
      const calls: LimitCall[] = applied.calls.map(({ limit, identityKey, lease }) =>
        lease === undefined ? { limit, identityKey, cost: 0 } : { limit, identityKey, cost: 0, lease },
      );
      const decided = () => decideOne(this.store, { mode, calls }).then(({ outcomes }) => outcomes);
      return this.failure
        .withoutFailureMode(decided, this.store.parts?.partitionOf(calls))
        .then((outcomes) => ({ request, limits: applied.limits, calls, outcomes }));
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
