import { type LimitStatus, PARAMETER_SOURCE, rateLimitHeaders, retryAfterSeconds } from '@quota-service/core';
import { Code, type DescriptorStatus, type RateLimitResponse, type StructValue } from './envoy-codec.js';
import type { MetadataValue } from './rls-config-schema.js';
import { type DescriptorVerdict, type RlsDecision, untilWindowEndMs } from './rls-decide.js';

const UINT32_MAX = 4_294_967_295;

export interface ResponseOptions {
  /** Answer OK whatever was over (the global shadow switch); statuses still say what was. */
  shadowMode: boolean;
  /** Add the RateLimit / RateLimit-Policy headers (Retry-After and the body's content type come with a denial regardless). */
  rateLimitHeaders: boolean;
}

/**
 * The RateLimitResponse of a decision: one status per descriptor in order,
 * OK or OVER_LIMIT overall, and on OVER_LIMIT the JSON body the HTTP
 * adapters send with their 429 (raw_body), Retry-After, and dynamic metadata
 * naming the limit that denied.
 */
export function rateLimitResponse(decision: RlsDecision, options: ResponseOptions): RateLimitResponse {
  const verdicts = decision.verdicts;
  const statuses = new Array<DescriptorStatus>(verdicts.length);
  // The enforced limits with a status, as the HTTP adapters report a policy's limits; the first over denies.
  let limits: LimitStatus[] | undefined;
  let denying: LimitedVerdict | undefined;
  let retryAfterMs = decision.retryAfterMs;
  for (let i = 0; i < verdicts.length; i++) {
    const verdict = verdicts[i]!;
    statuses[i] = statusOf(verdict);
    if (verdict.kind !== 'limited' || verdict.shadow) continue;
    if (verdict.over) {
      denying ??= verdict;
      retryAfterMs = Math.max(retryAfterMs, verdict.retryAfterMs);
    }
    if (options.rateLimitHeaders && (verdict.outcome !== undefined || verdict.rule.blocks)) {
      limits ??= [];
      limits.push(limitStatusOf(verdict));
    }
  }
  const over = decision.over && !options.shadowMode;
  const response: RateLimitResponse = { overall_code: over ? Code.OVER_LIMIT : Code.OK, statuses, response_headers_to_add: [] };
  const metadata = passedMetadata(verdicts);
  if (metadata !== undefined) response.dynamic_metadata = { fields: [{ key: 'metadata', value: metadata }] };
  if (limits !== undefined) {
    const headers = rateLimitHeaders({ allowed: !over, deniedBy: denying?.rule.name ?? '', retryAfterMs, limits });
    for (const key in headers) response.response_headers_to_add.push({ key, value: headers[key]! });
  }
  if (!over) return response;

  const seconds = retryAfterSeconds(retryAfterMs);
  response.response_headers_to_add.push({ key: 'Retry-After', value: String(seconds) }, { key: 'content-type', value: 'application/json' });
  const domain = decision.domain?.name ?? '';
  const limit = decision.source === 'fail_closed' ? '' : (denying?.rule.name ?? '');
  const body =
    decision.source === 'fail_closed'
      ? {
          error: 'rate_limiter_unavailable',
          message: `The rate limiter is unavailable and this endpoint does not proceed without it; try again in ${seconds} s.`,
          policy: domain,
          retry_after_ms: retryAfterMs,
          limit,
        }
      : {
          error: 'rate_limit_exceeded',
          message: `Too many requests: limit "${limit}" of domain "${domain}" is used up; try again in ${seconds} s.`,
          policy: domain,
          retry_after_ms: retryAfterMs,
          limit,
        };
  response.raw_body = Buffer.from(JSON.stringify(body));
  response.dynamic_metadata = {
    fields: [
      ...(metadata === undefined ? [] : [{ key: 'metadata', value: metadata }]),
      { key: 'domain', value: { string_value: domain } },
      { key: 'limit', value: { string_value: limit } },
      { key: 'descriptor_index', value: { number_value: denying === undefined ? -1 : decision.verdicts.indexOf(denying) } },
      { key: 'retry_after_ms', value: { number_value: retryAfterMs } },
      { key: 'source', value: { string_value: decision.source } },
    ],
  };
  return response;
}

type LimitedVerdict = Extract<DescriptorVerdict, { kind: 'limited' }>;

/** An enforced limit's status for the RateLimit headers. */
function limitStatusOf(verdict: LimitedVerdict): LimitStatus {
  const { rule, outcome } = verdict;
  return {
    name: rule.name,
    algorithm: rule.limit!.algorithm.name,
    limit: rule.blocks ? 0 : rule.limit!.algorithm.capacity(rule.limit!.params),
    remaining: rule.blocks ? 0 : (outcome?.remaining ?? 0),
    resetAfterMs: rule.blocks ? verdict.retryAfterMs : (outcome?.resetAfterMs ?? 0),
    // A rule's own limit: the configuration has no plans or overrides.
    applied: PARAMETER_SOURCE.default,
    plan: '',
    leasesHeld: 0,
  };
}

function statusOf(verdict: DescriptorVerdict): DescriptorStatus {
  switch (verdict.kind) {
    case 'none':
      return { code: Code.OK, limit_remaining: 0 };
    case 'unlimited':
      // As envoyproxy/ratelimit answers an unlimited descriptor: OK, the most remaining a uint32 holds.
      return { code: Code.OK, limit_remaining: UINT32_MAX };
    case 'limited': {
      const { rule, outcome } = verdict;
      const status: DescriptorStatus = {
        // A shadow rule answers OK whatever it would have said.
        code: verdict.over && !verdict.shadow ? Code.OVER_LIMIT : Code.OK,
        // As envoyproxy/ratelimit answers: the name the file gave the rule, else empty.
        current_limit: { name: rule.ownName ?? '', requests_per_unit: rule.report.requestsPerUnit, unit: rule.report.unit },
        limit_remaining: rule.blocks || outcome === undefined ? 0 : Math.min(UINT32_MAX, Math.max(0, Math.floor(outcome.remaining))),
      };
      // A fixed window nothing has counted in yet still ends when its window does, as envoyproxy/ratelimit answers.
      const resetMs = rule.blocks ? verdict.retryAfterMs : outcome?.resetAfterMs === 0 ? (untilWindowEndMs(rule) ?? 0) : outcome?.resetAfterMs;
      if (resetMs !== undefined) status.duration_until_reset = { seconds: Math.floor(resetMs / 1000), nanos: (resetMs % 1000) * 1_000_000 };
      return status;
    }
  }
}

/**
 * The `metadata` of the rules of the descriptors that passed (OK), merged as
 * envoyproxy/ratelimit merges them: maps merge key by key, and otherwise the
 * first descriptor's value stays. Undefined when none has any.
 */
function passedMetadata(verdicts: readonly DescriptorVerdict[]): StructValue | undefined {
  let merged: Record<string, MetadataValue> | undefined;
  for (const verdict of verdicts) {
    if (verdict.kind !== 'limited' || verdict.rule.metadata === undefined || (verdict.over && !verdict.shadow)) continue;
    merged ??= {};
    mergeInto(merged, verdict.rule.metadata);
  }
  return merged === undefined ? undefined : structValue(merged);
}

function mergeInto(into: Record<string, MetadataValue>, from: Readonly<Record<string, MetadataValue>>): void {
  for (const [key, value] of Object.entries(from)) {
    const known = into[key];
    if (known === undefined) into[key] = isMap(value) ? structuredClone(value) : value;
    else if (isMap(known) && isMap(value)) mergeInto(known, value);
  }
}

function isMap(value: MetadataValue | undefined): value is Record<string, MetadataValue> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function structValue(value: MetadataValue): StructValue {
  if (value === null) return { null_value: 0 };
  if (typeof value === 'boolean') return { bool_value: value };
  if (typeof value === 'number') return { number_value: value };
  if (typeof value === 'string') return { string_value: value };
  if (Array.isArray(value)) return { list_value: { values: value.map(structValue) } };
  return { struct_value: { fields: Object.entries(value).map(([key, inner]) => ({ key, value: structValue(inner) })) } };
}
