import {
  type AlgorithmName,
  identityKey,
  InvalidArgumentError,
  type LimitStatus,
  parsePolicies,
  PolicyFileError,
  type PolicySet,
  stateKeys,
  validatePeek,
  type Window,
} from '@quota-service/core';
import type { QuotaEngine } from '../../engine/engine.js';
import { type OverrideMatch, type OverrideRecord, type OverrideStore, validateOverride, validateTarget } from '../../overrides/override.js';
import { checkMayOverride, checkMaySee, type ListedOverride, visibleOverrides } from './admin-scope.js';
import type { AdminCaller } from './audit.js';
import type { StateReset } from './state-reset.js';

/** Why a reset leaves a concurrency limit alone. */
const LEASES_STAY = "which a reset leaves alone: leases are work still running, and end with a Release or expire after the limit's lease_ttl";

/** A target as an admin names it, before validation. */
export interface TargetInput {
  limit: string;
  match: OverrideMatch | undefined;
  value: string;
}

/** Thrown when there is no override to get or delete (the gRPC layer answers NOT_FOUND). */
export class OverrideNotFoundError extends Error {
  override name = 'OverrideNotFoundError';
}

/**
 * The admin API's actions, transport-free: reset an identity's state, manage
 * overrides, check a policy file. Each change answers what was before and
 * after it, which the gRPC layer writes to the audit log (src/api/admin/admin-audit.ts).
 */
export class QuotaAdmin {
  constructor(
    private readonly engine: QuotaEngine,
    private readonly overrides: OverrideStore,
    private readonly state: StateReset,
  ) {}

  private get policies(): PolicySet {
    return this.engine.policySet;
  }

  // ResetQuota's policy is checked against the caller's list before it gets here (src/grpc/auth-middleware.ts);
  // the override calls name a limit, checked here against every policy that uses it (admin-scope.ts).

  /**
   * Removes the identity's state under the policy's limits (or the named
   * ones): its next decision there starts full. Answers the statuses just
   * before and just after. Concurrency limits are left alone: their leases
   * stand for work still running, which a reset does not stop; freeing them
   * would let more than the limit run at once. They end with a Release, or
   * expire after lease_ttl when their holder is gone.
   */
  async reset(input: {
    policy: string;
    identity: Readonly<Record<string, string>>;
    limits: readonly string[];
  }): Promise<{ before: LimitStatus[]; after: LimitStatus[] }> {
    const request = validatePeek(this.policies, { policy: input.policy, identity: input.identity });
    const policy = request.policy;
    input.limits.forEach((name, i) => {
      const limit = policy.limits.find((l) => l.name === name);
      if (limit === undefined) throw new InvalidArgumentError(`limits[${i}]`, `policy "${policy.name}" has no limit ${JSON.stringify(name.slice(0, 64))}`);
      if (limit.algorithm.lease !== undefined) throw new InvalidArgumentError(`limits[${i}]`, `limit "${name}" is a concurrency limit, ${LEASES_STAY}`);
    });
    const resettable = policy.limits.filter((limit) => limit.algorithm.lease === undefined).map((limit) => limit.name);
    if (resettable.length === 0) throw new InvalidArgumentError('policy', `policy "${policy.name}" has only concurrency limits, ${LEASES_STAY}`);
    const chosen = (name: string) => (input.limits.length === 0 ? resettable.includes(name) : input.limits.includes(name));
    const keys: string[] = [];
    request.policy.limits.forEach((limit, i) => {
      if (chosen(limit.name))
        keys.push(...stateKeys(identityKey(limit.name, limit.keyBy, request.identityValues[i]!), (limit.params as { window?: Window }).window));
    });
    const peek = () => this.engine.getQuota({ policy: input.policy, identity: input.identity }).then((all) => all.filter((s) => chosen(s.name)));
    const before = await peek();
    await this.state.reset(keys);
    const after = await peek();
    return { before, after };
  }

  async setOverride(
    input: {
      target: TargetInput;
      parameters: { algorithm: AlgorithmName; fields: Record<string, unknown> } | undefined;
      ttlMs: number;
      reason: string;
    },
    caller: AdminCaller,
  ): Promise<{ current: OverrideRecord; previous: OverrideRecord | undefined }> {
    checkMayOverride(this.policies, caller, input.target.limit);
    const request = validateOverride(this.policies, { ...input, setBy: caller.name });
    return this.overrides.set(request);
  }

  async getOverride(input: TargetInput, caller: AdminCaller): Promise<OverrideRecord> {
    checkMayOverride(this.policies, caller, input.limit);
    const { target, limit } = validateTarget(this.policies, input);
    const record = await this.overrides.get(target, limit.keyBy);
    if (record === undefined) throw new OverrideNotFoundError(`no ${target.match} override of limit "${target.limit}" for that value`);
    return record;
  }

  /** The overrides in force (of one limit, when named) that the caller may see, values it may not see as digests (admin-scope.ts). */
  async listOverrides(limit: string, caller: AdminCaller): Promise<ListedOverride[]> {
    if (limit !== '') checkMaySee(this.policies, caller, limit);
    return visibleOverrides(this.policies, caller, await this.overrides.list(limit === '' ? undefined : limit));
  }

  async deleteOverride(input: TargetInput, caller: AdminCaller): Promise<OverrideRecord> {
    checkMayOverride(this.policies, caller, input.limit);
    const { target, limit } = validateTarget(this.policies, input);
    const previous = await this.overrides.delete(target, limit.keyBy);
    if (previous === undefined) throw new OverrideNotFoundError(`no ${target.match} override of limit "${target.limit}" for that value`);
    return previous;
  }

  /** A policy file checked as the service loads it (the same parser and messages), not loaded. */
  validatePolicies(text: string, source: string): { valid: boolean; message: string; policies: string[] } {
    try {
      return { valid: true, message: '', policies: [...parsePolicies(text, source === '' ? 'policies' : source).keys()] };
    } catch (error) {
      if (error instanceof PolicyFileError) return { valid: false, message: error.message, policies: [] };
      throw error;
    }
  }
}
