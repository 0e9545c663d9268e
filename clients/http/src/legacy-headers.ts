import type { Decision as QuotaDecision } from '@quota-service/core';

/**
 * The X-RateLimit-* headers older clients read, for one limit: the limit that
 * denied, or else the one with the least remaining (the first on a tie).
 * X-RateLimit-Reset is a unix time in whole seconds (rounded up): when the
 * limit is full again, or, for the limit that denied, when to retry. No
 * headers when the decision carries no limit status (fail_open, fail_closed).
 */
export function legacyRateLimitHeaders(
  decision: Pick<QuotaDecision, 'allowed' | 'deniedBy' | 'retryAfterMs' | 'limits'>,
  nowMs: number = Date.now(),
): Record<string, string> {
  let chosen = decision.limits[0];
  if (chosen === undefined) return {};
  const denied = !decision.allowed && decision.deniedBy !== '';
  for (const limit of decision.limits) {
    if (denied ? limit.name === decision.deniedBy : limit.remaining < chosen.remaining) chosen = limit;
  }
  const afterMs = denied && chosen.name === decision.deniedBy ? decision.retryAfterMs : chosen.resetAfterMs;
  return {
    'X-RateLimit-Limit': String(Math.floor(chosen.limit)),
    'X-RateLimit-Remaining': String(Math.max(0, Math.floor(chosen.remaining))),
    'X-RateLimit-Reset': String(Math.ceil((nowMs + Math.max(0, afterMs)) / 1000)),
  };
}
