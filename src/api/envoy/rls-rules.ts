import {
  algorithms,
  encodeIdentityValue,
  type FailureMode,
  type Limit,
  type LimitDefinition,
  type Policy,
  rlsKeyPrefix,
  type SlicesDefinition,
  toSliceOptions,
  UNIT_MS,
  UNITS,
  type UnitName,
  windowOfLength,
} from '@quota-service/core';
import { Unit, type UnitNumber } from './envoy-codec.js';
import type { AlgorithmLimitDefinition, DescriptorDefinition, MetadataValue } from './rls-config-schema.js';

/**
 * The loaded configuration of Envoy's rate limit service: per domain a tree
 * of descriptor entries, each possibly holding a rule. Built once per load
 * (src/api/envoy/rls-config.ts), read by the matcher (rls-match.ts) and the
 * decision (rls-decide.ts); never changed after.
 */
export interface RlsConfig {
  readonly domains: ReadonlyMap<string, RlsDomain>;
}

export interface RlsDomain {
  readonly name: string;
  /** The file it came from (for logs). */
  readonly file: string;
  readonly root: RlsNode;
  /** Its failure mode, as the engine reads it (QuotaEngine.decideCalls). */
  readonly policy: Policy;
}

/** One level of descriptor entries: the entries with a value, with a wildcard value, and with a key only. */
export interface RlsNode {
  /** By `key` + NUL + `value`. */
  readonly exact: ReadonlyMap<string, RlsEntry>;
  /** In file order: the first whose key is equal and whose pattern matches wins. */
  readonly wildcards: readonly { key: string; pattern: RegExp; entry: RlsEntry }[];
  readonly byKey: ReadonlyMap<string, RlsEntry>;
}

export interface RlsEntry {
  readonly rule: RlsRule | undefined;
  readonly children: RlsNode | undefined;
}

export interface RlsRule {
  /** The stats key of envoyproxy/ratelimit, without the domain: `key_value.subkey`. The metrics' `rule` label. */
  readonly path: string;
  /** rate_limit.name (or limit.name), else the path: current_limit.name, the RateLimit headers, denied_by. */
  readonly name: string;
  /** The name the file gave (rate_limit.name, limit.name): only a named rule can be replaced. */
  readonly ownName: string | undefined;
  /** Undefined when unlimited. */
  readonly limit: Limit | undefined;
  /** requests_per_unit 0: never grants, the store is not asked. */
  readonly blocks: boolean;
  readonly replaces: readonly string[];
  readonly shadow: boolean;
  /**
   * quota_mode: over its limit, this descriptor says OVER_LIMIT, but the
   * request is OVER_LIMIT for it only when every quota-mode descriptor of the
   * request is over. Decided on its own, not all or nothing with the others.
   */
  readonly quota: boolean;
  readonly detailedMetric: boolean;
  /** metadata: returned under `metadata` in the response's dynamic metadata when the descriptor passes. */
  readonly metadata: Readonly<Record<string, MetadataValue>> | undefined;
  /**
   * share_threshold on the way to this rule: per entry index, the wildcard
   * value whose matches share one counter (it stands in the state key for
   * the request's value); undefined when no level shares.
   */
  readonly shared: readonly (string | undefined)[] | undefined;
  /** value_to_metric on the way to this rule: the levels, to build the metrics label per request; undefined when no level asks. */
  readonly metricLevels: readonly RlsLevel[] | undefined;
  /**
   * Hits on this rule are spent even when they go over its limit (the balance
   * goes into debt, at most one limit deep), whatever the other descriptors
   * decide: a charge after the response, which must be counted. A
   * descriptor's `limit` override matching this rule spends when over too.
   */
  readonly spendsWhenOver: boolean;
  /** current_limit as Envoy reads it (docs/envoy.md, "Limits as Envoy sees them"). */
  readonly report: { readonly requestsPerUnit: number; readonly unit: UnitNumber };
  /** The rule's state keys start with this (docs/keys.md); a hash tag of the descriptor's entries follows. */
  readonly keyPrefix: string;
}

/** One configured level on the way from the domain to a rule, as far as metrics labels and shared counters need it. */
export interface RlsLevel {
  readonly key: string;
  /** The file's value (exact or with wildcards); undefined for a key alone. */
  readonly value: string | undefined;
  readonly wildcard: boolean;
  readonly valueToMetric: boolean;
  readonly share: boolean;
}

const UNIT_NUMBERS: Readonly<Record<UnitName, UnitNumber>> = {
  second: Unit.SECOND,
  minute: Unit.MINUTE,
  hour: Unit.HOUR,
  day: Unit.DAY,
  week: Unit.WEEK,
  month: Unit.MONTH,
  year: Unit.YEAR,
};
const UINT32_MAX = 4_294_967_295;

/** The engine's view of a domain: its name for logs and its failure mode. */
export function domainPolicy(domain: string, failure: FailureMode): Policy {
  return Object.freeze({ name: `rls:${domain}`, description: '', limits: [], failure, requestIdTtlMs: 0 });
}

/** A config path segment: `key` or `key=value`, each part percent-encoded (so `/`, `:`, `{`, `}` never appear raw). */
export function pathSegment(key: string, value: string | undefined): string {
  return value === undefined ? encodeIdentityValue(key) : `${encodeIdentityValue(key)}=${encodeIdentityValue(value)}`;
}

/**
 * The rule of one configured descriptor, or undefined when it has neither
 * rate_limit nor limit. `levels`: the configured levels from the domain down
 * to this descriptor, itself included.
 */
export function ruleOf(domain: string, definition: DescriptorDefinition, path: string, keyPath: string, levels: readonly RlsLevel[]): RlsRule | undefined {
  const ownName = definition.rate_limit?.name ?? definition.limit?.name;
  const common = {
    path,
    ownName,
    shadow: definition.shadow_mode,
    quota: definition.quota_mode,
    detailedMetric: definition.detailed_metric,
    metadata: definition.metadata === undefined ? undefined : deepFreeze(definition.metadata),
    shared: levels.some((level) => level.share) ? Object.freeze(levels.map((level) => (level.share ? level.value : undefined))) : undefined,
    metricLevels: levels.some((level) => level.valueToMetric) ? Object.freeze([...levels]) : undefined,
    spendsWhenOver: definition.spend_when_over,
  };
  if (definition.rate_limit !== undefined) {
    const rate = definition.rate_limit;
    const name = rate.name ?? path;
    if (rate.unlimited || rate.unit === undefined) {
      return Object.freeze({
        ...common,
        name,
        limit: undefined,
        blocks: false,
        replaces: rate.replaces.map((r) => r.name),
        report: { requestsPerUnit: 0, unit: Unit.SECOND },
        keyPrefix: '',
      });
    }
    const limit = withSlices(windowLimit(name, rate.requests_per_unit, rate.unit), definition.slices);
    return Object.freeze({
      ...common,
      name,
      limit,
      blocks: rate.requests_per_unit === 0,
      replaces: rate.replaces.map((r) => r.name),
      report: { requestsPerUnit: rate.requests_per_unit, unit: UNIT_NUMBERS[rate.unit] },
      keyPrefix: rlsKeyPrefix(domain, `rule:${keyPath}:fixed_window`),
    });
  }
  if (definition.limit === undefined) return undefined;
  const own = definition.limit;
  const name = own.name ?? path;
  const limit = withSlices(algorithmLimit(name, own), definition.slices);
  return Object.freeze({
    ...common,
    name,
    limit,
    blocks: false,
    replaces: own.replaces.map((r) => r.name),
    report: projected(own),
    keyPrefix: rlsKeyPrefix(domain, `rule:${keyPath}:${own.algorithm}`),
  });
}

/** The rule's limit with its `slices` (the schema allows them only where the algorithm takes them). */
function withSlices(limit: Limit, slices: SlicesDefinition | undefined): Limit {
  return slices === undefined ? limit : Object.freeze({ ...limit, slices: toSliceOptions(slices) });
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * A fixed window of `requests` per Envoy unit: a named window for second to
 * day, a window of the unit's length in ms for week, month and year (aligned
 * to the Unix epoch, as envoyproxy/ratelimit aligns them). Also a descriptor's
 * `limit` override.
 */
export function windowLimit(name: string, requests: number, unit: UnitName): Limit {
  const window = unit === 'second' || unit === 'minute' || unit === 'hour' || unit === 'day' ? unit : UNIT_MS[unit];
  // Zero grants nothing; the limit keeps 1 so that its parameters stay valid, and the rule says `blocks`.
  return limitObject(name, 'fixed_window', { limit: Math.max(1, requests), window });
}

function algorithmLimit(name: string, definition: AlgorithmLimitDefinition): Limit {
  switch (definition.algorithm) {
    case 'token_bucket':
      return limitObject(name, 'token_bucket', { capacity: definition.capacity, refillPerSecond: definition.refill_per_second });
    case 'gcra':
      return limitObject(name, 'gcra', { capacity: definition.capacity, refillPerSecond: definition.refill_per_second });
    case 'leaky_bucket':
      // Policing only: a proxy cannot hold a request back for a shaping delay.
      return limitObject(name, 'leaky_bucket', { capacity: definition.capacity, leakPerSecond: definition.leak_per_second, mode: 'policing' });
    case 'fixed_window':
    case 'sliding_window_log':
    case 'sliding_window_counter':
      return limitObject(name, definition.algorithm, { limit: definition.limit, window: namedWindow(definition.window) });
  }
}

/** A length that is exactly second, minute, hour or day keeps that name (and the policy files' key layout). */
const namedWindow = windowOfLength;

function limitObject(name: string, algorithm: keyof typeof algorithms, params: object): Limit {
  // `definition` is what ListPolicies shows of a policy's limit; these limits are not listed there.
  return Object.freeze({
    name,
    keyBy: 'descriptor',
    algorithm: algorithms[algorithm],
    params,
    definition: { name, algorithm } as unknown as LimitDefinition,
  }) as Limit;
}

/**
 * current_limit for our algorithms (Envoy knows only N per unit):
 * - windows of a unit's length: N per that unit, exactly;
 * - windows of another length: the same rate over the shortest unit at least
 *   as long as the window, rounded down (100 per 90 s: 4000 per hour);
 * - buckets and GCRA: the sustained rate (refill or leak per second) over the
 *   shortest unit in which it is at least 1, rounded down (0.5/s: 30 per
 *   minute). The burst a bucket allows beyond it shows in limit_remaining and
 *   in the RateLimit-Policy header's quota.
 */
export function projected(definition: AlgorithmLimitDefinition): { requestsPerUnit: number; unit: UnitNumber } {
  if ('window' in definition) {
    const exact = UNITS.find((u) => UNIT_MS[u] === definition.window);
    if (exact !== undefined) return { requestsPerUnit: Math.min(UINT32_MAX, definition.limit), unit: UNIT_NUMBERS[exact] };
    const unit = UNITS.find((u) => UNIT_MS[u] >= definition.window) ?? 'year';
    return { requestsPerUnit: Math.min(UINT32_MAX, Math.floor((definition.limit * UNIT_MS[unit]) / definition.window)), unit: UNIT_NUMBERS[unit] };
  }
  const perSecond = 'refill_per_second' in definition ? definition.refill_per_second : definition.leak_per_second;
  const unit = (['second', 'minute', 'hour', 'day'] as const).find((u) => perSecond * (UNIT_MS[u] / 1000) >= 1) ?? 'day';
  return { requestsPerUnit: Math.min(UINT32_MAX, Math.floor(perSecond * (UNIT_MS[unit] / 1000))), unit: UNIT_NUMBERS[unit] };
}
