import { type AlgorithmName, formatWindow, type Limit, type Window, windowMs, windowOfLength } from '@quota-service/core';
import type { LimitDefinition, LimitParameters } from '@quota-service/contract';

/**
 * quota.v1 LimitParameters to and from the models' parameters. The models'
 * parameter objects (capacity, refillPerSecond, limit, window, leakPerSecond,
 * mode, leaseTtlMs) have the proto messages' field names, so a conversion only picks the
 * oneof branch.
 */
const BRANCH: Record<AlgorithmName, keyof LimitParameters> = {
  token_bucket: 'tokenBucket',
  fixed_window: 'fixedWindow',
  sliding_window_log: 'slidingWindowLog',
  sliding_window_counter: 'slidingWindowCounter',
  leaky_bucket: 'leakyBucket',
  gcra: 'gcra',
  concurrency: 'concurrency',
};

/** The policy file's spelling of each proto field. */
const FILE_FIELD: Record<string, string> = {
  capacity: 'capacity',
  refillPerSecond: 'refill_per_second',
  limit: 'limit',
  window: 'window',
  leakPerSecond: 'leak_per_second',
  mode: 'mode',
  leaseTtlMs: 'lease_ttl_ms',
};

export function toProtoParameters(algorithm: string, params: unknown): LimitParameters {
  const branch = BRANCH[algorithm as AlgorithmName];
  if (branch === undefined) return {};
  const window = (params as { window?: Window }).window;
  // A window travels as people write it (`minute`, `15m`) and as its length in ms.
  if (window !== undefined) return { [branch]: { ...(params as object), window: formatWindow(window), windowMs: windowMs(window) } };
  return { [branch]: { ...(params as object) } };
}

/** A limit as ListPolicies describes it: its default parameters, and its plans'. */
export function toProtoLimit(limit: Limit): LimitDefinition {
  const plans =
    limit.plans === undefined ? [] : [...limit.plans].map(([name, plan]) => ({ name, parameters: toProtoParameters(plan.algorithm.name, plan.params) }));
  const slices = limit.slices === undefined ? {} : { slices: { share: limit.slices.share, maxUnits: limit.slices.maxUnits, ttlMs: limit.slices.ttlMs } };
  return { name: limit.name, keyBy: limit.keyBy, ...toProtoParameters(limit.algorithm.name, limit.params), planBy: limit.planBy ?? '', plans, ...slices };
}

/**
 * The algorithm a LimitParameters names and its fields in the policy file's
 * spelling, leaving out fields at their proto default (0 or ''): none of them
 * is a valid value, so unset means "as the limit has it". Undefined when no
 * branch is set.
 */
export function fromProtoParameters(parameters: LimitParameters | undefined): { algorithm: AlgorithmName; fields: Record<string, unknown> } | undefined {
  if (parameters === undefined) return undefined;
  for (const [algorithm, branch] of Object.entries(BRANCH) as [AlgorithmName, keyof LimitParameters][]) {
    const message = parameters[branch] as Record<string, unknown> | undefined;
    if (message === undefined) continue;
    const fields: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(message)) {
      if (value === 0 || value === '' || value === undefined || name === 'windowMs') continue;
      fields[FILE_FIELD[name] ?? name] = value;
    }
    // window_ms stands in for an empty window: the same length, written as the policy file would.
    const ms = message.windowMs;
    if (fields.window === undefined && typeof ms === 'number' && ms > 0)
      fields.window = Number.isSafeInteger(ms) ? formatWindow(windowOfLength(ms)) : String(ms);
    return { algorithm, fields };
  }
  return undefined;
}
