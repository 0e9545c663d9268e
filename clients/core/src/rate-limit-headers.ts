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
  if (decision.limits.length === 0) return {};
  const policy = decision.limits.map((l) => `${sfString(l.name)};q=${Math.floor(l.limit)}`).join(', ');
  const current = decision.limits
    .map((l) => {
      const seconds = !decision.allowed && l.name === decision.deniedBy ? retryAfterSeconds(decision.retryAfterMs) : Math.ceil(l.resetAfterMs / 1000);
      return `${sfString(l.name)};r=${Math.max(0, Math.floor(l.remaining))};t=${Math.max(0, seconds)}`;
    })
    .join(', ');
  return { 'RateLimit-Policy': policy, RateLimit: current };
}

/** An SF String: quoted, with `"` and `\` escaped (limit names are plain anyway). */
function sfString(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
