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
} from '@quota-service/core';
import type { QuotaEngine } from '../engine/engine.js';
import { type OverrideMatch, type OverrideRecord, type OverrideStore, type OverrideTarget, validateOverride, validateTarget } from '../overrides/override.js';
import { type AdminCaller, type AuditLog, identityDigests, valueDigest } from './audit.js';
import type { StateReset } from './state-reset.js';

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
 * overrides, check a policy file. Each action that changes something writes
 * one audit line (who, what, before, after); identity values appear there as
 * digests only.
 */
export class QuotaAdmin {
  constructor(
    private readonly engine: QuotaEngine,
    private readonly overrides: OverrideStore,
    private readonly state: StateReset,
    private readonly audit: AuditLog,
  ) {}

  private get policies(): PolicySet {
    return this.engine.policySet;
  }

  /**
   * Removes the identity's state under the policy's limits (or the named
   * ones): its next decision there starts full. Answers the statuses just
   * before and just after.
   */
  async reset(
    input: { policy: string; identity: Readonly<Record<string, string>>; limits: readonly string[] },
    caller: AdminCaller,
  ): Promise<{ before: LimitStatus[]; after: LimitStatus[] }> {
    const request = validatePeek(this.policies, { policy: input.policy, identity: input.identity });
    const names = request.policy.limits.map((limit) => limit.name);
    input.limits.forEach((name, i) => {
      if (!names.includes(name))
        throw new InvalidArgumentError(`limits[${i}]`, `policy "${request.policy.name}" has no limit ${JSON.stringify(name.slice(0, 64))}`);
    });
    const chosen = (name: string) => input.limits.length === 0 || input.limits.includes(name);
    const keys: string[] = [];
    request.policy.limits.forEach((limit, i) => {
      if (chosen(limit.name)) keys.push(...stateKeys(identityKey(limit.name, limit.keyBy, request.identityValues[i]!)));
    });
    const peek = () => this.engine.getQuota({ policy: input.policy, identity: input.identity }).then((all) => all.filter((s) => chosen(s.name)));
    const before = await peek();
    await this.state.reset(keys);
    const after = await peek();
    this.audit.done(caller, 'reset', {
      target: { policy: request.policy.name, identity: identityDigests(input.identity), limits: before.map((s) => s.name) },
      before: before.map(brief),
      after: after.map(brief),
    });
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
    const request = validateOverride(this.policies, { ...input, setBy: caller.name });
    const result = await this.overrides.set(request);
    this.audit.done(caller, 'override.set', {
      target: auditTarget(request.target),
      before: result.previous === undefined ? null : auditRecord(result.previous),
      after: auditRecord(result.current),
      reason: request.reason,
    });
    return result;
  }

  async getOverride(input: TargetInput): Promise<OverrideRecord> {
    const { target, limit } = validateTarget(this.policies, input);
    const record = await this.overrides.get(target, limit.keyBy);
    if (record === undefined) throw new OverrideNotFoundError(`no ${target.match} override of limit "${target.limit}" for that value`);
    return record;
  }

  async listOverrides(limit: string): Promise<OverrideRecord[]> {
    return this.overrides.list(limit === '' ? undefined : limit);
  }

  async deleteOverride(input: TargetInput, caller: AdminCaller): Promise<OverrideRecord> {
    const { target, limit } = validateTarget(this.policies, input);
    const previous = await this.overrides.delete(target, limit.keyBy);
    if (previous === undefined) throw new OverrideNotFoundError(`no ${target.match} override of limit "${target.limit}" for that value`);
    this.audit.done(caller, 'override.delete', { target: auditTarget(target), before: auditRecord(previous), after: null });
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

const brief = (status: LimitStatus) => ({ limit: status.name, remaining: status.remaining, of: status.limit });

const auditTarget = (target: OverrideTarget) => ({ limit: target.limit, match: target.match, valueSha256: valueDigest(target.value) });

const auditRecord = (record: OverrideRecord) => ({
  parameters: record.parameters,
  expiresAtMs: record.expiresAtMs,
  setBy: record.setBy,
  setAtMs: record.setAtMs,
});
