import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { algorithms } from '../algorithms/registry.js';
import type { Limit, Policy, PolicySet } from '../types.js';
import { policyFileSchema, type LimitDefinition, type PolicyFile } from './policy-schema.js';

export class PolicyFileError extends Error {
  override name = 'PolicyFileError';
}

/** Parses and validates policy YAML; every error names the policy and field at fault. */
export function parsePolicies(yamlText: string, source = 'policies'): PolicySet {
  const document = parseDocument(yamlText, { prettyErrors: true });
  if (document.errors.length > 0) {
    throw new PolicyFileError(`${source}: invalid YAML: ${document.errors.map((e) => e.message).join('; ')}`);
  }
  const parsed = policyFileSchema.safeParse(document.toJS());
  if (!parsed.success) {
    throw new PolicyFileError(`${source}: invalid policies:\n${formatIssues(parsed.error)}`);
  }
  return buildPolicySet(parsed.data, source);
}

function buildPolicySet(file: PolicyFile, source: string): PolicySet {
  const policies = new Map<string, Policy>();
  for (const [name, policy] of Object.entries(file.policies)) {
    const failure = Object.freeze({ mode: policy.failure_mode, localShare: policy.local_share ?? 1 });
    const limits = Object.freeze(policy.limits.map(toLimit));
    if (failure.mode === 'local') checkLocalShare(source, name, limits, failure.localShare);
    policies.set(name, Object.freeze({ name, description: policy.description, limits, failure, requestIdTtlMs: policy.request_id_ttl_ms }));
  }
  return policies;
}

/** A share so small that a limit's local copy could never grant one unit is a mistake, not a policy. */
function checkLocalShare(source: string, policy: string, limits: readonly Limit[], share: number): void {
  for (const limit of limits) {
    const scaled = limit.algorithm.capacity(limit.algorithm.scaleParams(limit.params, share));
    if (scaled < 1) {
      throw new PolicyFileError(
        `${source}: invalid policies:\n  policies.${policy}.local_share: ${share} of limit "${limit.name}" grants ${scaled} units per instance; it must grant at least 1`,
      );
    }
  }
}

function toLimit(definition: LimitDefinition): Limit {
  const common = { name: definition.name, keyBy: definition.key_by, definition };
  switch (definition.algorithm) {
    case 'token_bucket':
      return Object.freeze({
        ...common,
        algorithm: algorithms.token_bucket,
        params: { capacity: definition.capacity, refillPerSecond: definition.refill_per_second },
      }) as Limit;
    case 'fixed_window':
      return Object.freeze({
        ...common,
        algorithm: algorithms.fixed_window,
        params: { limit: definition.limit, window: definition.window },
      }) as Limit;
    case 'sliding_window_log':
      return Object.freeze({
        ...common,
        algorithm: algorithms.sliding_window_log,
        params: { limit: definition.limit, window: definition.window },
      }) as Limit;
    case 'sliding_window_counter':
      return Object.freeze({
        ...common,
        algorithm: algorithms.sliding_window_counter,
        params: { limit: definition.limit, window: definition.window },
      }) as Limit;
    case 'leaky_bucket':
      return Object.freeze({
        ...common,
        algorithm: algorithms.leaky_bucket,
        params: { capacity: definition.capacity, leakPerSecond: definition.leak_per_second, mode: definition.mode },
      }) as Limit;
    case 'gcra':
      return Object.freeze({
        ...common,
        algorithm: algorithms.gcra,
        params: { capacity: definition.capacity, refillPerSecond: definition.refill_per_second },
      }) as Limit;
  }
}

/** `policies.orders.limits[0].capacity: Too small: expected number to be >0`, one line per issue. */
function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.map((segment, i) => (typeof segment === 'number' ? `[${segment}]` : `${i === 0 ? '' : '.'}${String(segment)}`)).join('');
      return `  ${path || '(file)'}: ${issue.message}`;
    })
    .join('\n');
}
