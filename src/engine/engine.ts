import type { Policy, PolicySet } from '../config/policies.js';
import type { QuotaStore } from '../store/store.js';
import { identityKey } from './keys.js';
import { validateRequest, type AllowInput } from './validate-request.js';

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
}

/** The decision: policy -> limits -> keys -> store call -> result. Transport-free. */
export class QuotaEngine {
  constructor(
    private readonly policies: PolicySet,
    private readonly store: QuotaStore,
  ) {}

  async allow(input: AllowInput): Promise<Decision> {
    const request = validateRequest(this.policies, input);
    // Policies hold exactly one limit for now (see policy-schema.ts), so one
    // store call decides the whole request atomically.
    const limits: LimitStatus[] = [];
    let deniedBy = '';
    let retryAfterMs = 0;
    for (const [index, limit] of request.policy.limits.entries()) {
      const key = identityKey(limit.name, limit.keyBy, request.identityValues[index] as string);
      const outcome = await this.store.decide(limit, key, request.cost);
      limits.push({
        name: limit.name,
        algorithm: limit.algorithm.name,
        limit: limit.algorithm.capacity(limit.params),
        remaining: outcome.remaining,
        resetAfterMs: outcome.resetAfterMs,
      });
      if (!outcome.allowed && deniedBy === '') {
        deniedBy = limit.name;
        retryAfterMs = outcome.retryAfterMs;
      }
    }
    return { allowed: deniedBy === '', retryAfterMs, deniedBy, limits };
  }

  listPolicies(): Policy[] {
    return [...this.policies.values()];
  }
}
