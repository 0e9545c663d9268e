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
    // The policy schema allows exactly one limit for now, so one store call
    // decides the whole request atomically. Several limits need an
    // all-or-nothing decision across them (spec 3.3), not a loop.
    const limit = request.policy.limits[0];
    const identityValue = request.identityValues[0];
    if (limit === undefined || identityValue === undefined) throw new Error(`policy ${request.policy.name} has no limit`);
    const outcome = await this.store.decide(limit, identityKey(limit.name, limit.keyBy, identityValue), request.cost);
    return {
      allowed: outcome.allowed,
      retryAfterMs: outcome.retryAfterMs,
      deniedBy: outcome.allowed ? '' : limit.name,
      limits: [
        {
          name: limit.name,
          algorithm: limit.algorithm.name,
          limit: limit.algorithm.capacity(limit.params),
          remaining: outcome.remaining,
          resetAfterMs: outcome.resetAfterMs,
        },
      ],
    };
  }

  listPolicies(): Policy[] {
    return [...this.policies.values()];
  }
}
