import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { d, type RlsDescriptor, rlsConfigDir, type RlsResponse } from '../../support/rls-client.js';
import { useRlsService } from '../../support/rls-service.js';

/**
 * A descriptor's own `limit` replaces the configured rule. With caller
 * authentication, only a caller with the `gateway` role (a proxy, which sets
 * it from its route configuration) has it honoured; any other caller allowed
 * the domain gets the configured rules, whatever limit it sends. A real
 * service process with a callers file, called by a client built from Envoy's
 * protos. (Without caller authentication the limit is honoured:
 * should-rate-limit.test.ts.)
 */
const GATEWAY_TOKEN = 'envoy-gateway-token-5d1e8b3a7c90f246';
const APP_TOKEN = 'direct-app-token-0a9b8c7d6e5f41322';
const config = rlsConfigDir({ 'edge.yaml': 'domain: edge\ndescriptors:\n  - key: api_key\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n' });
const callersFile = join(rlsConfigDir({}), 'callers.yaml');
writeFileSync(
  callersFile,
  `callers:
  envoy-edge:
    token: ${GATEWAY_TOKEN}
    domains: [edge]
    roles: [gateway]
  app:
    token: ${APP_TOKEN}
    domains: [edge]
`,
);
const as = (token: string) => ({ authorization: `Bearer ${token}` });
const withLimit = (key: string, value: string, requests: number, unit = 'HOUR'): RlsDescriptor => ({
  ...d([key, value]),
  limit: { requests_per_unit: requests, unit },
});
const summary = (response: RlsResponse) =>
  response.statuses.map((s) => [s.code, s.current_limit?.requests_per_unit ?? null, s.current_limit?.unit ?? null, s.limit_remaining] as const);

describe('descriptor limits and the callers file', () => {
  const rls = useRlsService(() => ({ QUOTA_RLS_CONFIG: config, QUOTA_AUTH_TOKENS: callersFile, QUOTA_RLS_STORE_TIMEOUT_MS: '2000' }));
  const { client } = rls;

  it('a caller that is not a gateway cannot raise its limit: its descriptor limit is ignored, the configured rule applies', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [withLimit('api_key', 'app-key', 1_000_000)] }, as(APP_TOKEN));
    expect(summary(await ask())).toEqual([['OK', 2, 'HOUR', 1]]);
    expect(summary(await ask())).toEqual([['OK', 2, 'HOUR', 0]]);
    const third = await ask();
    expect(third.overall_code).toBe('OVER_LIMIT');
    expect(summary(third)).toEqual([['OVER_LIMIT', 2, 'HOUR', 0]]);
    // Nor can it put a limit on a descriptor no rule matches, or take one off with a limit of its own unit.
    const unmatched = await client.shouldRateLimit({ domain: 'edge', descriptors: [withLimit('tenant', 'acme', 0)] }, as(APP_TOKEN));
    expect(summary(unmatched)).toEqual([['OK', null, null, 0]]);
    // Told once, whatever the number of calls.
    await rls.process.logged(/"caller":"app".*sent descriptors with their own limit, which only a gateway may set/);
    expect(rls.process.output().stdout.match(/which only a gateway may set/g)).toHaveLength(1);
  });

  it("a gateway's descriptor limit replaces the configured rule, as Envoy's route configuration sets it", async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [withLimit('api_key', 'gateway-key', 1000)] }, as(GATEWAY_TOKEN));
    expect(summary(await ask())).toEqual([['OK', 1000, 'HOUR', 999]]);
    expect(summary(await ask())).toEqual([['OK', 1000, 'HOUR', 998]]);
    // Without a limit of its own the descriptor gets the configured rule, apart from the override's count.
    const plain = await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['api_key', 'gateway-key'])] }, as(GATEWAY_TOKEN));
    expect(summary(plain)).toEqual([['OK', 2, 'HOUR', 1]]);
  });
});
