import type { z } from 'zod';
import { algorithms, type AlgorithmName } from '../algorithms/registry.js';
import { PARAMETER_SOURCE, type Limit, type Policy, type PolicySet } from '../types.js';
import { parseYaml, YamlTextError, yamlValue } from '../yaml-text.js';
import { PARAMETER_MODELS, parameterFields, parameterSchema } from './limit-parameters.js';
import { toSliceOptions } from './slice-options.js';
import { mergePlan, policyFileSchema, type LimitDefinition, type PolicyFile } from './policy-schema.js';

export class PolicyFileError extends Error {
  override name = 'PolicyFileError';
}

/** Parses and validates policy YAML; every error names the policy and field at fault. */
export function parsePolicies(yamlText: string, source = 'policies'): PolicySet {
  let value: unknown;
  try {
    value = yamlValue(parseYaml(yamlText, { prettyErrors: true }));
  } catch (error) {
    if (error instanceof YamlTextError) throw new PolicyFileError(`${source}: invalid YAML: ${error.message}`);
    throw error;
  }
  const parsed = policyFileSchema.safeParse(value);
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
    for (const one of [limit, ...(limit.plans?.values() ?? [])]) {
      const scaled = one.algorithm.capacity(one.algorithm.scaleParams(one.params, share));
      if (scaled < 1) {
        const which = one.plan === undefined ? '' : ` under plan "${one.plan}"`;
        throw new PolicyFileError(
          `${source}: invalid policies:\n  policies.${policy}.local_share: ${share} of limit "${limit.name}"${which} grants ${scaled} units per instance; it must grant at least 1`,
        );
      }
    }
  }
}

function toLimit(definition: LimitDefinition): Limit {
  const base = {
    name: definition.name,
    keyBy: definition.key_by,
    definition,
    algorithm: algorithms[definition.algorithm],
    ...(definition.slices === undefined ? {} : { slices: toSliceOptions(definition.slices) }),
  };
  const limit: Limit = { ...base, params: toParams(definition.algorithm, definition) };
  if (definition.plans === undefined || definition.plan_by === undefined) return Object.freeze(limit);
  const fields = parameterFields(definition.algorithm);
  const plans = new Map<string, Limit>();
  for (const [plan, given] of Object.entries(definition.plans)) {
    // Checked by the schema already: this only fills in the defaults (a leaky bucket's mode).
    const merged = parameterSchema(definition.algorithm).parse(mergePlan(definition as unknown as Record<string, unknown>, fields, given));
    plans.set(plan, Object.freeze({ ...base, params: toParams(definition.algorithm, merged), applied: PARAMETER_SOURCE.plan, plan }));
  }
  return Object.freeze({ ...limit, planBy: definition.plan_by, plans });
}

/** An algorithm's parameters as the models take them, from the policy file's spelling (PARAMETER_MODELS). */
export function toParams(algorithm: AlgorithmName, p: Record<string, unknown>): unknown {
  return PARAMETER_MODELS[algorithm](p);
}

/** At most this many issues are listed: a file with thousands of wrong entries gets a message of readable size. */
const MAX_ISSUES = 100;

/** `policies.orders.limits[0].refill_per_second: Too small: expected number to be >0`, one line per issue. */
function formatIssues(error: z.ZodError): string {
  const lines = error.issues.slice(0, MAX_ISSUES).map((issue) => {
    const path = issue.path.map((segment, i) => (typeof segment === 'number' ? `[${segment}]` : `${i === 0 ? '' : '.'}${String(segment)}`)).join('');
    return `  ${path || '(file)'}: ${issue.message}`;
  });
  if (error.issues.length > MAX_ISSUES) lines.push(`  ...and ${error.issues.length - MAX_ISSUES} more`);
  return lines.join('\n');
}
