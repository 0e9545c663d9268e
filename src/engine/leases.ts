import {
  type Decision,
  type DecideMode,
  type LeaseInput,
  LeaseNotHeldError,
  type LimitCall,
  type LimitOutcome,
  type LimitStatus,
  type PolicySet,
  requestLeaseMember,
  statuses,
  validateLease,
  type ValidRequest,
} from '@quota-service/core';
import type { OverrideView } from '../overrides/override.js';
import type { QuotaStore } from '../store/store.js';
import { appliedLimits } from './applied-limits.js';
import type { StoreFailurePolicy } from './failure.js';
import { firstPartition, slotGroups } from './slot-groups.js';

/**
 * What happened to leases, as this replica saw it (metrics: src/metrics/lease-metrics.ts).
 * `lease` names one lease of the policy (its member: the whole identity and the request id).
 */
export interface LeaseEvents {
  acquired(policy: string, lease: string, expiresInMs: number): void;
  renewed(policy: string, lease: string, expiresInMs: number): void;
  /** Released by its holder (Release answered released = true). */
  released(policy: string, lease: string): void;
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
    private readonly events: LeaseEvents | undefined,
  ) {}

  /** Ends the lease: released = false when it was not held (never acquired, released, or expired), and nothing changed. */
  release(input: LeaseInput): Promise<ReleaseResult> {
    return this.step(input, 'release').then(({ request, limits, calls, outcomes }) => {
      let released = false;
      for (let i = 0; i < calls.length; i++) if (calls[i]!.lease !== undefined && outcomes[i]!.allowed) released = true;
      if (released) this.events?.released(request.policy.name, requestLeaseMember(request));
      return { released, limits: statuses(limits, outcomes) };
    });
  }

  /** Extends the lease to lease_ttl_ms from now (store clock): answers that, in ms; LeaseNotHeldError (NOT_FOUND) when it is no longer held. */
  renew(input: LeaseInput): Promise<number> {
    return this.step(input, 'renew').then(({ request, calls, outcomes }) => {
      let expiresInMs = 0;
      for (let i = 0; i < calls.length; i++) {
        const { limit, lease } = calls[i]!;
        if (lease === undefined) continue;
        if (!outcomes[i]!.allowed) throw new LeaseNotHeldError(request.policy.name);
        const ttl = limit.algorithm.lease!.ttlMs(limit.params);
        if (expiresInMs === 0 || ttl < expiresInMs) expiresInMs = ttl;
      }
      this.events?.renewed(request.policy.name, requestLeaseMember(request), expiresInMs);
      return expiresInMs;
    });
  }

  /** An Allow's decision: a lease acquired (or found held by a retry) in the store, for the metrics. */
  acquired(request: ValidRequest, decision: Decision): void {
    if (this.events === undefined || decision.source !== 'store' || decision.leaseExpiresInMs === undefined) return;
    this.events.acquired(request.policy.name, requestLeaseMember(request), decision.leaseExpiresInMs);
  }

  private step(
    input: LeaseInput,
    mode: DecideMode,
  ): Promise<{ request: ValidRequest; limits: readonly ValidRequest['limits'][number][]; calls: LimitCall[]; outcomes: LimitOutcome[] }> {
    try {
      const request = validateLease(this.policies(), input);
      const applied = appliedLimits(request, this.overrides, this.store);
      // Without the overrides' guard: the parameters only give a renewal its lease_ttl_ms, and the member is what counts.
      const calls: LimitCall[] = applied.calls.map(({ limit, identityKey, lease }) =>
        lease === undefined ? { limit, identityKey, cost: 0 } : { limit, identityKey, cost: 0, lease },
      );
      const groups = slotGroups(this.store, calls);
      const decided = () =>
        Promise.all(
          groups.map((group) =>
            this.store.decideGroup(
              group.map((i) => calls[i]!),
              mode,
            ),
          ),
        ).then((answers) => {
          const outcomes: LimitOutcome[] = new Array(calls.length);
          for (let g = 0; g < groups.length; g++) {
            const group = groups[g]!;
            for (let j = 0; j < group.length; j++) outcomes[group[j]!] = answers[g]!.outcomes[j]!;
          }
          return outcomes;
        });
      return this.failure.peek(decided, firstPartition(this.store, calls, groups)).then((outcomes) => ({ request, limits: applied.limits, calls, outcomes }));
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
