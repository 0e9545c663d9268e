import { type LimitStatus, PARAMETER_SOURCE, rateLimitHeaders } from '@quota-service/core';
import { describe, expect, it } from 'vitest';

function status(name: string, limit: number, remaining: number, resetAfterMs: number): LimitStatus {
  return { name, algorithm: 'token_bucket', limit, remaining, resetAfterMs, applied: PARAMETER_SOURCE.default, plan: '', leasesHeld: 0 };
}

describe('RateLimit and RateLimit-Policy headers', () => {
  it('one item per limit, in order: q the limit, r the remaining rounded down (never below 0), t the seconds until full', () => {
    const headers = rateLimitHeaders({
      allowed: true,
      deniedBy: '',
      retryAfterMs: 0,
      limits: [status('per-user', 10, 6.7, 1_200), status('per-tenant', 1000.9, -2, 0)],
    });
    expect(headers).toEqual({
      'RateLimit-Policy': '"per-user";q=10, "per-tenant";q=1000',
      RateLimit: '"per-user";r=6;t=2, "per-tenant";r=0;t=0',
    });
  });

  it("the limit that denied says Retry-After's seconds as its t; the others their own", () => {
    const headers = rateLimitHeaders({
      allowed: false,
      deniedBy: 'per-minute',
      retryAfterMs: 30_500,
      limits: [status('burst', 5, 3, 400), status('per-minute', 60, 0, 59_000)],
    });
    expect(headers.RateLimit).toBe('"burst";r=3;t=1, "per-minute";r=0;t=31');
  });

  it('a name with a quote or a backslash is an SF String with them escaped', () => {
    const headers = rateLimitHeaders({ allowed: true, deniedBy: '', retryAfterMs: 0, limits: [status('say "hi" \\ bye', 1, 1, 0)] });
    expect(headers['RateLimit-Policy']).toBe('"say \\"hi\\" \\\\ bye";q=1');
    expect(headers.RateLimit).toBe('"say \\"hi\\" \\\\ bye";r=1;t=0');
  });

  it('no limit status (a failure mode answered): no headers', () => {
    expect(rateLimitHeaders({ allowed: true, deniedBy: '', retryAfterMs: 0, limits: [] })).toEqual({});
  });
});
