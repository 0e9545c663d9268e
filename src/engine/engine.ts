import type { Limit, Policy, PolicySet } from '../config/policies.js';
import { createLogger } from '../logger.js';
import { StoreFailurePolicy, type DecisionSource } from '../store/failure.js';
import type { QuotaStore } from '../store/store.js';
import { identityKey } from './keys.js';
import { validateRequest, type AllowInput, type ValidRequest } from './validate-request.js';

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

  async allow(input: AllowInput): Promise<Decision> {
    const request = validateRequest(this.policies, input);
    const started = performance.now();
    const decision = await this.failure.decide(
      request.policy,
      () => this.decideOn(this.store, request, (limit) => limit),
      (store, scale) => this.decideOn(store, request, scale),
    );
    this.onDecision?.(request.policy.name, decision, (performance.now() - started) / 1000);
    return decision;
  }

  /** The decision on one store; `scale` gives the limit to apply (the local limiter's share, or the limit itself). */
  private async decideOn(store: QuotaStore, request: ValidRequest, scale: (limit: Limit) => Limit): Promise<Omit<Decision, 'source'>> {
    // The policy schema allows exactly one limit for now, so one store call
    // decides the whole request atomically. Several limits need an
    // all-or-nothing decision across them (spec 3.3), not a loop.
    const policyLimit = request.policy.limits[0];
    const identityValue = request.identityValues[0];
    if (policyLimit === undefined || identityValue === undefined) throw new Error(`policy ${request.policy.name} has no limit`);
    const limit = scale(policyLimit);
    const outcome = await store.decide(limit, identityKey(limit.name, limit.keyBy, identityValue), request.cost);
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
