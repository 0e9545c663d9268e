import { describe, expect, it } from 'vitest';
import type { Decision } from '@quota-service/core';
import { QuotaMetrics } from '../../src/metrics/metrics.js';

/** One sample of the Prometheus text format, e.g. sample(text, 'quota_decisions_total{policy="a",...}'). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const decision = (allowed: boolean, source: Decision['source'], limit = 'per-user'): Decision => ({
  allowed,
  retryAfterMs: allowed ? 0 : 100,
  deniedBy: allowed ? '' : limit,
  limits: [{ name: limit, algorithm: 'token_bucket', limit: 10, remaining: 0, resetAfterMs: 0, applied: 1, plan: '', leasesHeld: 0 }],
  delayMs: 0,
  source,
});

const series = (policy: string, limit: string, result: string, source: string) =>
  `quota_decisions_total{policy="${policy}",limit="${limit}",result="${result}",source="${source}"}`;

describe('quota_decisions_total, counted between scrapes (src/metrics/decision-tally.ts)', () => {
  it('each decision is counted once under its own labels, however many scrapes see it', async () => {
    const metrics = new QuotaMetrics();
    for (let i = 0; i < 3; i++) metrics.decided('orders', decision(true, 'store'), 0.001);
    metrics.decided('orders', decision(false, 'store'), 0.001);
    metrics.decided('orders', decision(true, 'local'), 0.001);
    metrics.decided('search', decision(false, 'fail_closed', 'per-tenant'), 0.001);

    let text = await metrics.registry.metrics();
    expect(sample(text, series('orders', 'per-user', 'allowed', 'store'))).toBe(3);
    expect(sample(text, series('orders', 'per-user', 'rejected', 'store'))).toBe(1);
    expect(sample(text, series('orders', 'per-user', 'allowed', 'local'))).toBe(1);
    expect(sample(text, series('search', 'per-tenant', 'rejected', 'fail_closed'))).toBe(1);
    expect(sample(text, series('orders', 'per-user', 'rejected', 'local'))).toBeUndefined();
    expect(sample(text, 'quota_check_duration_seconds_count{source="store"}')).toBe(4);

    // A second scrape with two more decisions: the earlier ones are not counted again.
    metrics.decided('orders', decision(true, 'store'), 0.001);
    metrics.decided('orders', decision(true, 'store'), 0.001);
    text = await metrics.registry.metrics();
    expect(sample(text, series('orders', 'per-user', 'allowed', 'store'))).toBe(5);
    expect(sample(text, series('orders', 'per-user', 'rejected', 'store'))).toBe(1);
    expect(sample(text, series('search', 'per-tenant', 'rejected', 'fail_closed'))).toBe(1);
    expect(sample(text, 'quota_check_duration_seconds_count{source="store"}')).toBe(6);
    text = await metrics.registry.metrics();
    expect(sample(text, series('orders', 'per-user', 'allowed', 'store'))).toBe(5);
  });
});
