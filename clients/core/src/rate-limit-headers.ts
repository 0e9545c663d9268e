import type { Decision as QuotaDecision } from './types.js';

/** Whole seconds for Retry-After: max(1, ceil(retry_ms / 1000)). */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

/**
 * RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers-11,
 * Structured Field lists), one item per limit of the decision, named after
 * the limit:
 *
 *   RateLimit-Policy: "orders";q=10
 *   RateLimit: "orders";r=0;t=1
 *
 * q is the limit (a bucket's capacity, a window's limit); `w` is left out
 * because a limit status does not carry its window. r is the remaining quota
 * rounded down; t is the seconds until the limit is full again, except for
 * the limit that denied, where t equals Retry-After (the draft: Retry-After
 * should not point earlier than the end of the effective window).
 * Empty when the decision carries no limit status (fail_open, fail_closed).
 * The HTTP adapters and Envoy's rate limit service send the same headers.
 */
export function rateLimitHeaders(decision: Pick<QuotaDecision, 'allowed' | 'deniedBy' | 'retryAfterMs' | 'limits'>): Record<string, string> {
  const limits = decision.limits;
  if (limits.length === 0) return {};
  // Both lists in one pass, each name quoted once: Envoy's door and the HTTP adapters build them for every answer.
  let policy = '';
  let current = '';
  for (let i = 0; i < limits.length; i++) {
    const l = limits[i]!;
    const name = sfString(l.name);
    const seconds = !decision.allowed && l.name === decision.deniedBy ? retryAfterSeconds(decision.retryAfterMs) : Math.ceil(l.resetAfterMs / 1000);
    const separator = i === 0 ? '' : ', ';
    policy += `${separator}${name};q=${Math.floor(l.limit)}`;
    current += `${separator}${name};r=${Math.max(0, Math.floor(l.remaining))};t=${Math.max(0, seconds)}`;
  }
  return { 'RateLimit-Policy': policy, RateLimit: current };
}

/** An SF String: quoted, with `"` and `\` escaped (limit names are plain anyway: then no regular expression runs). */
function sfString(value: string): string {
  if (!value.includes('"') && !value.includes('\\')) return `"${value}"`;
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
