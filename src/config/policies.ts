import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import type { Algorithm } from '../algorithms/algorithm.js';
import { algorithms } from '../algorithms/registry.js';
import { policyFileSchema, type LimitDefinition, type PolicyFile } from './policy-schema.js';

/** A limit ready for the engine: its algorithm with parsed parameters. */
export interface Limit<P = unknown> {
  readonly name: string;
  readonly keyBy: string;
  readonly algorithm: Algorithm<P>;
  readonly params: P;
  /** As written in the policy file, for ListPolicies. */
  readonly definition: LimitDefinition;
}

export interface Policy {
  readonly name: string;
  readonly description: string;
  readonly limits: readonly Limit[];
}

export type PolicySet = ReadonlyMap<string, Policy>;

export class PolicyFileError extends Error {
  override name = 'PolicyFileError';
}

export async function loadPolicyFile(path: string): Promise<PolicySet> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new PolicyFileError(`cannot read policy file ${path}: ${(error as Error).message}`);
  }
  return parsePolicies(text, path);
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
  return buildPolicySet(parsed.data);
}

function buildPolicySet(file: PolicyFile): PolicySet {
  const policies = new Map<string, Policy>();
  for (const [name, policy] of Object.entries(file.policies)) {
    policies.set(name, Object.freeze({ name, description: policy.description, limits: Object.freeze(policy.limits.map(toLimit)) }));
  }
  return policies;
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
      const path = issue.path
        .map((segment, i) => (typeof segment === 'number' ? `[${segment}]` : `${i === 0 ? '' : '.'}${String(segment)}`))
        .join('');
      return `  ${path || '(file)'}: ${issue.message}`;
    })
    .join('\n');
}
