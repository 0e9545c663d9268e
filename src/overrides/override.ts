import {
  type AlgorithmName,
  checkId,
  InvalidArgumentError,
  type Limit,
  type OverrideGuard,
  PARAMETER_SOURCE,
  parameterFields,
  parameterSchema,
  type PolicySet,
  sameWindow,
  toParams,
  WINDOW_IS_THE_LIMITS,
} from '@quota-service/core';

/**
 * A runtime override: other parameters for one limit and one identity value
 * (exact) or every value that starts with a prefix, set through the admin API.
 * Precedence: exact > prefix (the longest that matches) > plan > default.
 */
export type OverrideMatch = 'exact' | 'prefix';

/** Names one override. */
export interface OverrideTarget {
  /** A limit name of the policy file. */
  readonly limit: string;
  readonly match: OverrideMatch;
  /** The identity value (exact) or its prefix, matched against the raw value of the limit's key_by part. */
  readonly value: string;
}

/** An override as stored. */
export interface OverrideRecord extends OverrideTarget {
  /** The limit's key_by when it was set (display only). */
  readonly keyBy: string;
  readonly algorithm: AlgorithmName;
  /** The whole parameters, in the policy file's spelling (capacity, refill_per_second, ...). */
  readonly parameters: Readonly<Record<string, unknown>>;
  /** Unix ms on the store's clock; 0: never. */
  readonly expiresAtMs: number;
  readonly reason: string;
  /** Who set it: the caller's name, or "loopback". */
  readonly setBy: string;
  readonly setAtMs: number;
  /** Unique per write: what a replica's view is checked against (override-guard.lua). */
  readonly stamp: string;
}

/** What an admin asks to set, validated (validateOverride). */
export interface OverrideRequest {
  readonly target: OverrideTarget;
  readonly keyBy: string;
  readonly algorithm: AlgorithmName;
  readonly parameters: Readonly<Record<string, unknown>>;
  /** 0: until deleted. */
  readonly ttlMs: number;
  readonly reason: string;
  readonly setBy: string;
}

/** An override that has not expired at `nowMs` (the store's clock). */
export const isLive = (record: OverrideRecord, nowMs: number): boolean => record.expiresAtMs === 0 || record.expiresAtMs > nowMs;

/** The limit with the override's parameters, as the decision applies it. */
export function overriddenLimit(limit: Limit, record: OverrideRecord): Limit {
  return {
    name: limit.name,
    keyBy: limit.keyBy,
    algorithm: limit.algorithm,
    definition: limit.definition,
    params: toParams(record.algorithm, record.parameters as Record<string, unknown>),
    applied: record.match === 'exact' ? PARAMETER_SOURCE.exactOverride : PARAMETER_SOURCE.wildcardOverride,
  };
}

/** An override's lifetime is bounded like a bucket's idle state: a year. */
export const MAX_OVERRIDE_TTL_MS = 366 * 24 * 3600 * 1000;
export const MAX_REASON_CHARS = 1024;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this pattern finds.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** The limit named `name` in the loaded policies (limits that share a name are the same limit). */
export function findLimit(policies: PolicySet, name: string): Limit | undefined {
  for (const policy of policies.values()) for (const limit of policy.limits) if (limit.name === name) return limit;
  return undefined;
}

/** Checks a target; errors name the field (`key.limit`, `key.match`, `key.value`). */
export function validateTarget(
  policies: PolicySet,
  target: { limit: string; match: OverrideMatch | undefined; value: string },
): { target: OverrideTarget; limit: Limit } {
  if (target.limit === '') throw new InvalidArgumentError('key.limit', 'must not be empty');
  const limit = findLimit(policies, target.limit);
  if (limit === undefined) throw new InvalidArgumentError('key.limit', `no limit named ${JSON.stringify(target.limit.slice(0, 64))} in the loaded policies`);
  if (target.match === undefined) throw new InvalidArgumentError('key.match', 'must be OVERRIDE_MATCH_EXACT or OVERRIDE_MATCH_PREFIX');
  checkId('key.value', target.value);
  return { target: { limit: limit.name, match: target.match, value: target.value }, limit };
}

/**
 * Checks a SetOverride: the target, parameters of the limit's algorithm (the
 * ones left out are the limit's default), which must pass the policy file's
 * rules for that algorithm, the TTL and the reason. Errors name the field.
 */
export function validateOverride(
  policies: PolicySet,
  input: {
    target: { limit: string; match: OverrideMatch | undefined; value: string };
    parameters: { algorithm: AlgorithmName; fields: Record<string, unknown> } | undefined;
    ttlMs: number;
    reason: string;
    setBy: string;
  },
): OverrideRequest {
  const { target, limit } = validateTarget(policies, input.target);
  const algorithm = limit.algorithm.name as AlgorithmName;
  if (input.parameters === undefined) throw new InvalidArgumentError('parameters', `required: ${algorithm} parameters for limit "${limit.name}"`);
  if (input.parameters.algorithm !== algorithm) {
    throw new InvalidArgumentError('parameters', `limit "${limit.name}" is a ${algorithm}; give ${algorithm} parameters, not ${input.parameters.algorithm}`);
  }
  const own = limit.definition as unknown as Record<string, unknown>;
  const window = input.parameters.fields.window;
  if (window !== undefined && !sameWindow(window, own.window)) throw new InvalidArgumentError(`parameters.${algorithm}.window`, WINDOW_IS_THE_LIMITS);
  const merged: Record<string, unknown> = {};
  for (const field of parameterFields(algorithm)) if (own[field] !== undefined) merged[field] = own[field];
  Object.assign(merged, input.parameters.fields);
  const parsed = parameterSchema(algorithm).safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InvalidArgumentError(`parameters.${algorithm}.${blamedField(issue.path, input.parameters.fields) || '(all)'}`, issue.message);
  }
  if (!Number.isSafeInteger(input.ttlMs) || input.ttlMs < 0 || input.ttlMs > MAX_OVERRIDE_TTL_MS) {
    throw new InvalidArgumentError('ttl_ms', `must be a whole number of milliseconds from 0 (never expires) to ${MAX_OVERRIDE_TTL_MS}, got ${input.ttlMs}`);
  }
  if (input.reason.length > MAX_REASON_CHARS)
    throw new InvalidArgumentError('reason', `must be at most ${MAX_REASON_CHARS} characters, got ${input.reason.length}`);
  if (!input.reason.isWellFormed() || CONTROL.test(input.reason)) throw new InvalidArgumentError('reason', 'must be printable text (no control characters)');
  return { target, keyBy: limit.keyBy, algorithm, parameters: parsed.data, ttlMs: input.ttlMs, reason: input.reason, setBy: input.setBy };
}

/**
 * The field an issue blames, among those the override gave: a check across
 * fields (capacity over refill rate) names one of them, which may be the
 * limit's own value the override left alone; then the field the override did
 * give is the one to change (an override of capacity 1e12 is refused for its
 * capacity, not for the limit's refill rate).
 */
function blamedField(path: readonly PropertyKey[], given: Record<string, unknown>): string {
  const named = path.map(String).join('.');
  if (path.length !== 1 || Object.hasOwn(given, named)) return named;
  const ratioFields = ['capacity', 'refill_per_second', 'leak_per_second'];
  if (!ratioFields.includes(named)) return named;
  const instead = ratioFields.find((field) => field !== named && Object.hasOwn(given, field));
  return instead ?? named;
}

/** The record a set writes, at the store's time `nowMs`. */
export function newRecord(request: OverrideRequest, nowMs: number, stamp: string): OverrideRecord {
  return {
    ...request.target,
    keyBy: request.keyBy,
    algorithm: request.algorithm,
    parameters: request.parameters,
    expiresAtMs: request.ttlMs === 0 ? 0 : nowMs + request.ttlMs,
    reason: request.reason,
    setBy: request.setBy,
    setAtMs: nowMs,
    stamp,
  };
}

/** Sort order of listings: limit, then exact before prefix, then value. */
export function compareOverrides(a: OverrideTarget, b: OverrideTarget): number {
  if (a.limit !== b.limit) return a.limit < b.limit ? -1 : 1;
  if (a.match !== b.match) return a.match === 'exact' ? -1 : 1;
  return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
}

/**
 * Overrides as the admin API manages them: stored in Redis (shared by every
 * replica, kept across restarts) or in the embedded store's memory.
 */
export interface OverrideStore {
  /** Creates or replaces; answers the stored record and the one it replaced. */
  set(request: OverrideRequest): Promise<{ current: OverrideRecord; previous: OverrideRecord | undefined }>;
  /** The live override of a target, if any. */
  get(target: OverrideTarget, keyBy: string): Promise<OverrideRecord | undefined>;
  /** Every live override (of one limit when given), sorted by compareOverrides. */
  list(limit?: string): Promise<OverrideRecord[]>;
  /** Removes one; answers what it removed (undefined: nothing was there, or it had expired). */
  delete(target: OverrideTarget, keyBy: string): Promise<OverrideRecord | undefined>;
}

/**
 * What the decisions read: this replica's view of the overrides, without a
 * store call per decision. The embedded store's view is always current; a
 * Redis replica's is checked inside each decision's script (guard) and read
 * again when it was stale (refresh).
 */
export interface OverrideView {
  /** The live exact override of `value` under `limit`, as far as this replica knows. */
  exact(limit: string, value: string): OverrideRecord | undefined;
  /** The live prefix override with the longest prefix of `value` under `limit` and of `algorithm`. */
  prefix(limit: string, algorithm: string, value: string): OverrideRecord | undefined;
  /** Redis: the guard of one limit call (undefined: the view needs no check); `slot`: identityKey's on a cluster, when known. */
  guard?(identityKey: string, exact: OverrideRecord | undefined, prefixApplied: OverrideRecord | undefined, slot?: number): OverrideGuard;
  /** Redis: reads the overrides of these calls again after `error` (isStaleOverrides) said the view was stale. */
  refresh?(calls: readonly { identityKey: string; limit: Limit }[], identityValues: readonly string[], error: Error): Promise<void>;
}

/** The script's answer when a replica's view was not current (override-guard.lua). */
const STALE = /^QUOTA_OVERRIDES_STALE (\d+)/;

export function isStaleOverrides(error: unknown): error is Error {
  return error instanceof Error && STALE.test(error.message);
}

/** The generation the store holds, from a stale error. */
export function staleGeneration(error: Error): number {
  return Number(STALE.exec(error.message)?.[1] ?? 0);
}
