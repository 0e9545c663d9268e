import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { parsePolicies } from '@quota-service/core';
import { RlsMetrics } from '../../../src/api/envoy/rls-metrics.js';
import { parseRlsConfig } from '../../../src/api/envoy/rls-config.js';
import { decideRls } from '../../../src/api/envoy/rls-decide.js';
import { QuotaEngine } from '../../../src/engine/engine.js';
import { MemoryStore } from '../../../src/store/memory.js';

/** One sample of the Prometheus text format, e.g. sample(text, 'quota_rls_requests_total{domain="edge",...}'). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const CONFIG = `
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: path
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: health
    rate_limit: { unlimited: true }
`;

describe('ShouldRateLimit metrics, counted between scrapes (src/api/envoy/rls-tally.ts)', () => {
  it('each call and descriptor is counted once under its own labels, however many scrapes see it', async () => {
    const registry = new Registry();
    const metrics = new RlsMetrics(registry);
    const engine = new QuotaEngine(parsePolicies('policies: {}'), new MemoryStore());
    const config = parseRlsConfig(new Map([['edge.yaml', CONFIG]]));
    const call = async (entries: Array<{ key: string; value: string }>, domain = 'edge') => {
      const decision = await decideRls(engine, config, { domain, hits_addend: 0, descriptors: entries.map((entry) => ({ entries: [entry] })) }, 100);
      metrics.decided(decision, 0.001);
    };
    // user a: 5 allowed (the 4th and 5th at or past 80% of the limit), then over; the path twice (the second would be over); health unlimited.
    for (let i = 0; i < 6; i++) await call([{ key: 'user', value: 'a' }]);
    await call([{ key: 'path', value: '/x' }]);
    await call([
      { key: 'path', value: '/x' },
      { key: 'health', value: 'y' },
    ]);
    await call([{ key: 'user', value: 'b' }], 'unknown');

    let text = await registry.metrics();
    expect(sample(text, 'quota_rls_requests_total{domain="edge",code="ok",source="store"}')).toBe(7);
    expect(sample(text, 'quota_rls_requests_total{domain="edge",code="over_limit",source="store"}')).toBe(1);
    expect(sample(text, 'quota_rls_requests_total{domain="",code="ok",source="store"}')).toBe(1);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="user",result="allowed"}')).toBe(5);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="user",result="over_limit"}')).toBe(1);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="path",result="allowed"}')).toBe(1);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="path",result="shadow_over_limit"}')).toBe(1);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="health",result="unlimited"}')).toBe(1);
    expect(sample(text, 'quota_rls_near_limit_total{domain="edge",rule="user"}')).toBe(2);
    expect(sample(text, 'quota_rls_near_limit_total{domain="edge",rule="path"}')).toBe(1);
    expect(sample(text, 'quota_rls_check_duration_seconds_count{source="store"}')).toBe(9);

    // Another call, another scrape: the earlier ones are not counted again.
    await call([{ key: 'user', value: 'c' }]);
    text = await registry.metrics();
    expect(sample(text, 'quota_rls_requests_total{domain="edge",code="ok",source="store"}')).toBe(8);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="user",result="allowed"}')).toBe(6);
    expect(sample(text, 'quota_rls_descriptors_total{domain="edge",rule="user",result="over_limit"}')).toBe(1);
    expect(sample(text, 'quota_rls_near_limit_total{domain="edge",rule="user"}')).toBe(2);
  });
});
