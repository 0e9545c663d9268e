import type { LimitOutcome } from '../algorithms/algorithm.js';
import type { LimitCall } from '../algorithms/decide-script.js';
import type { Limit, Policy, PolicySet } from '../config/policies.js';
import type { QuotaStore } from '../store/store.js';
import { identityKey } from './keys.js';
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
}

/** The decision: policy -> limits -> keys -> store call -> result. Transport-free. */
export class QuotaEngine {
  constructor(
    private readonly policies: PolicySet,
    private readonly store: QuotaStore,
  ) {}

  async allow(input: AllowInput): Promise<Decision> {
    const request = validateRequest(this.policies, input);
    // The policy schema allows exactly one limit for now, so one store call on
    // one identity's keys (one slot) decides the whole request atomically.
    const outcomes = await this.store.decideAll(limitCalls(request), 'spend');
    const denied = request.policy.limits.findIndex((_, i) => outcomes[i]?.allowed !== true);
    const allowed = denied === -1;
    return {
      allowed,
      retryAfterMs: allowed ? 0 : (outcomes[denied]?.retryAfterMs ?? 0),
      deniedBy: allowed ? '' : (request.policy.limits[denied]?.name ?? ''),
      limits: statuses(request.policy.limits, outcomes),
      delayMs: allowed ? Math.max(0, ...outcomes.map((o) => o.delayMs ?? 0)) : 0,
    };
  }

  /** GetQuota: every limit's status now, spending nothing and writing nothing. */
  async getQuota(input: PeekInput): Promise<LimitStatus[]> {
    const request = validatePeek(this.policies, input);
    return statuses(request.policy.limits, await this.store.decideAll(limitCalls(request), 'peek'));
  }

  listPolicies(): Policy[] {
    return [...this.policies.values()];
  }
}

function limitCalls(request: ValidRequest): LimitCall[] {
  return request.policy.limits.map((limit, i) => {
    const value = request.identityValues[i];
    if (value === undefined) throw new Error(`policy ${request.policy.name}: no identity value for limit ${limit.name}`);
    return { limit, identityKey: identityKey(limit.name, limit.keyBy, value), cost: request.cost };
  });
}

function statuses(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): LimitStatus[] {
  return limits.map((limit, i) => ({
    name: limit.name,
    algorithm: limit.algorithm.name,
    limit: limit.algorithm.capacity(limit.params),
    remaining: outcomes[i]?.remaining ?? 0,
    resetAfterMs: outcomes[i]?.resetAfterMs ?? 0,
  }));
}
