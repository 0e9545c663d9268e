import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createChannel } from 'nice-grpc';
import { describe, expect, it } from 'vitest';
import { listedServices } from '../../support/reflection.js';
import { d, header, rlsConfigDir } from '../../support/rls-client.js';
import { useRlsService } from '../../support/rls-service.js';

/**
 * Running it: hot reload of the configuration directory, callers allowed
 * per domain, the metrics per domain and rule, reflection, and the global
 * switches (shadow mode, RateLimit headers off). Real service processes.
 */

const EDGE = (n: number) => `domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: ${n} }\n`;
const ENVOY_TOKEN = 'envoy-token-0123456789';
const OTHER_TOKEN = 'other-token-0123456789';

describe('a service with a configuration directory, callers and metrics', () => {
  let dir: string;
  const envoy = { authorization: `Bearer ${ENVOY_TOKEN}` };
  const rls = useRlsService(() => {
    dir = rlsConfigDir({ 'edge.yaml': EDGE(1), 'internal.yaml': 'domain: internal\n' });
    const callers = join(rlsConfigDir({}), 'callers.yaml');
    writeFileSync(callers, `callers:\n  envoy:\n    token: ${ENVOY_TOKEN}\n    domains: [edge]\n  app:\n    token: ${OTHER_TOKEN}\n    policies: ['*']\n`);
    return { QUOTA_RLS_CONFIG: dir, QUOTA_AUTH_TOKENS: callers, QUOTA_METRICS_ADDR: '127.0.0.1:0' };
  });
  const { client } = rls;

  it('a caller needs a token, and may ask about its own domains only', async () => {
    await expect(client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'x'])] })).rejects.toMatchObject({ code: 16 });
    await expect(client.shouldRateLimit({ domain: 'internal', descriptors: [d(['user', 'x'])] }, envoy)).rejects.toMatchObject({
      code: 7,
      details: 'caller "envoy" may not use domain "internal"',
    });
    // A caller of the quota API with no domains listed may not use this API.
    await expect(client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'x'])] }, { authorization: `Bearer ${OTHER_TOKEN}` })).rejects.toMatchObject(
      { code: 7 },
    );
    expect((await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'x'])] }, envoy)).overall_code).toBe('OK');
  });

  it('reflection lists the service beside QuotaService', async () => {
    const channel = createChannel(`127.0.0.1:${await rls.process.port}`);
    const names = await listedServices(channel);
    channel.close();
    expect(names).toEqual(expect.arrayContaining(['envoy.service.ratelimit.v3.RateLimitService', 'quota.v1.QuotaService']));
  });

  it('metrics per domain and rule: allowed, over limit, near limit; requests by code and source', async () => {
    await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'metrics'])] }, envoy);
    await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'metrics'])] }, envoy);
    const text = await rls.metrics();
    expect(text).toMatch(/quota_rls_descriptors_total\{domain="edge",rule="user",result="allowed"\} [1-9]/);
    expect(text).toMatch(/quota_rls_descriptors_total\{domain="edge",rule="user",result="over_limit"\} [1-9]/);
    expect(text).toMatch(/quota_rls_near_limit_total\{domain="edge",rule="user"\} [1-9]/);
    expect(text).toMatch(/quota_rls_requests_total\{domain="edge",code="over_limit",source="store"\} [1-9]/);
    expect(text).toMatch(/quota_rls_check_duration_seconds_count\{source="store"\} [1-9]/);
  });

  it('hot reload: a changed file applies without a restart; an invalid one keeps the loaded config and says where', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'reload'])] }, envoy);
    expect((await ask()).statuses[0]!.current_limit?.requests_per_unit).toBe(1);
    // As a ConfigMap volume changes: a new file renamed over the old one.
    writeFileSync(join(dir, '.edge.tmp'), EDGE(5));
    renameSync(join(dir, '.edge.tmp'), join(dir, 'edge.yaml'));
    await rls.process.logged(/"msg":"rate limit config reloaded"/);
    expect((await ask()).statuses[0]!.current_limit?.requests_per_unit).toBe(5);
    writeFileSync(join(dir, 'edge.yaml'), 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 2 }\n');
    const line = await rls.process.logged(/"msg":"rate limit config reload rejected/);
    expect(line).toContain('edge.yaml: domain \\"edge\\": descriptor \\"user\\" (descriptors[0]) rate_limit.unit');
    expect((await ask()).statuses[0]!.current_limit?.requests_per_unit).toBe(5);
    const text = await rls.metrics();
    expect(text).toMatch(/quota_rls_config_reloads_total\{result="failure"\} [1-9]/);
  });
});

describe('the global switches: shadow mode on, RateLimit headers off', () => {
  const { client } = useRlsService(() => ({
    QUOTA_RLS_CONFIG: rlsConfigDir({ 'edge.yaml': EDGE(1) }),
    QUOTA_RLS_SHADOW_MODE: 'true',
    QUOTA_RLS_RATELIMIT_HEADERS: 'false',
  }));

  it('over the limit: the answer is OK, the status still says OVER_LIMIT, and no RateLimit headers are added', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'shadow'])] });
    const first = await ask();
    expect(header(first, 'RateLimit')).toBeUndefined();
    const over = await ask();
    expect(over.overall_code).toBe('OK');
    expect(over.statuses[0]!.code).toBe('OVER_LIMIT');
    expect(over.raw_body.length).toBe(0);
  });
});
