import { describe, expect, it } from 'vitest';
import { d, header, metadataOf } from '../../support/rls-client.js';
import { rlsService, rlsStores } from './should-rate-limit-fixture.js';

/**
 * ShouldRateLimit with the configurations of envoyproxy/ratelimit's README
 * (examples 1 to 9) and the descriptors Istio, Envoy Gateway and agentgateway
 * send, on the embedded store, a single Redis and a 3+3 Redis Cluster: the
 * same assertions on each.
 */
const stores = rlsStores();
const UINT32_MAX = 4_294_967_295;

describe.each(stores)('ShouldRateLimit on the %s', (_name, env, storeKeys) => {
  const { client, metrics } = rlsService(env);

  it('example 1: a value-specific rule per database, counted per descriptor', async () => {
    const users = await client.shouldRateLimit({ domain: 'mongo_cps', descriptors: [d(['database', 'users'])] });
    expect(users.overall_code).toBe('OK');
    expect(users.statuses[0]).toMatchObject({
      code: 'OK',
      // Unnamed in the file: an empty name, as envoyproxy/ratelimit answers.
      current_limit: { requests_per_unit: 500, unit: 'SECOND', name: '' },
      limit_remaining: 499,
    });
    // A value with no rule of its own and no key-only rule: no limit.
    const other = await client.shouldRateLimit({ domain: 'mongo_cps', descriptors: [d(['database', 'other'])] });
    expect(other.statuses[0]).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: 0 });
  });

  it('example 2: nested marketing limit beside the per-number limit; the number limit is not charged for a rejected request', async () => {
    const number = '2061111111';
    const ask = () =>
      client.shouldRateLimit({ domain: 'messaging', descriptors: [d(['message_type', 'marketing'], ['to_number', number]), d(['to_number', number])] });
    for (let i = 1; i <= 5; i++) {
      const response = await ask();
      expect(response.overall_code).toBe('OK');
      expect(response.statuses.map((s) => s.limit_remaining)).toEqual([5 - i, 100 - i]);
    }
    const denied = await ask();
    expect(denied.overall_code).toBe('OVER_LIMIT');
    expect(denied.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    // All or nothing: the per-number limit still has 95 (envoyproxy/ratelimit would have charged it).
    expect(denied.statuses[1]!.limit_remaining).toBe(95);
    const alone = await client.shouldRateLimit({ domain: 'messaging', descriptors: [d(['to_number', number])] });
    expect(alone.statuses[0]!.limit_remaining).toBe(94);
  });

  it('example 3: the most specific match first; a rule of 0 requests blocks and writes nothing', async () => {
    const blocked = await client.shouldRateLimit({ domain: 'edge_proxy_per_ip', descriptors: [d(['remote_address', '50.0.0.5'])] });
    expect(blocked.overall_code).toBe('OVER_LIMIT');
    expect(blocked.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 0, unit: 'SECOND' }, limit_remaining: 0 });
    // The store was not asked: no state for the blocked address.
    if (storeKeys !== undefined) expect((await storeKeys()).filter((key) => key.includes('edge_proxy_per_ip'))).toEqual([]);
    const other = await client.shouldRateLimit({ domain: 'edge_proxy_per_ip', descriptors: [d(['remote_address', '50.0.0.1'])] });
    expect(other.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 10 }, limit_remaining: 9 });
  });

  it('example 4: a rule applies at the descriptor last entry only: levels must match', async () => {
    const nested = await client.shouldRateLimit({ domain: 'example4', descriptors: [d(['key', 'value'], ['subkey', 'subvalue'])] });
    expect(nested.statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 300 }, limit_remaining: 299 });
    const tooDeep = await client.shouldRateLimit({ domain: 'example4', descriptors: [d(['single', 'level'], ['subkey', 'subvalue'])] });
    expect(tooDeep.statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
    const tooShallow = await client.shouldRateLimit({ domain: 'example4', descriptors: [d(['key', 'value'])] });
    expect(tooShallow.statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
  });

  it('example 5: unlimited answers OK with the most remaining and no limit; the store is not asked', async () => {
    const response = await client.shouldRateLimit({ domain: 'internal', descriptors: [d(['ldap', 'x']), d(['azure', 'y'])] });
    expect(response.statuses[0]).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: UINT32_MAX });
    expect(response.statuses[1]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 100, unit: 'MINUTE' }, limit_remaining: 99 });
  });

  it('example 6: a shadow rule answers OK past its limit; the other user is limited', async () => {
    const ask = (user: string) => client.shouldRateLimit({ domain: 'example6', descriptors: [d(['service', 'auth-service'], ['user', user])] });
    const a = [await ask('user-a'), await ask('user-a'), await ask('user-a')];
    expect(a.map((r) => r.overall_code)).toEqual(['OK', 'OK', 'OK']);
    expect(a.map((r) => r.statuses[0]!.code)).toEqual(['OK', 'OK', 'OK']);
    expect(a[2]!.raw_body.length).toBe(0);
    // What the shadow rule would have denied is counted.
    expect(await metrics()).toMatch(/quota_rls_descriptors_total\{domain="example6",rule="service.user_user-a",result="shadow_over_limit"\} 1\n/);
    const b = [await ask('user-b'), await ask('user-b'), await ask('user-b')];
    expect(b.map((r) => r.overall_code)).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  it('example 7: replaces drops the replaced limit for that request; it stays unchanged', async () => {
    const specific = d(['key_1', 'value_1'], ['user', 'bkthomps']);
    const replacing = d(['key_2', 'value_2'], ['user', 'bkthomps']);
    const both = await client.shouldRateLimit({ domain: 'example7', descriptors: [specific, replacing] });
    expect(both.statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
    expect(both.statuses[1]).toMatchObject({ current_limit: { requests_per_unit: 10 }, limit_remaining: 9 });
    const alone = await client.shouldRateLimit({ domain: 'example7', descriptors: [specific] });
    expect(alone.statuses[0]).toMatchObject({ current_limit: { name: 'specific_limit', requests_per_unit: 5 }, limit_remaining: 4 });
  });

  it('example 8: detailed_metric changes metrics only: each value counts on its own', async () => {
    const first = await client.shouldRateLimit({ domain: 'example8', descriptors: [d(['key1', 'unspecified_value'])] });
    const second = await client.shouldRateLimit({ domain: 'example8', descriptors: [d(['key1', 'unspecified_value2'])] });
    const specific = await client.shouldRateLimit({ domain: 'example8', descriptors: [d(['key1', 'value1'])] });
    expect([first, second, specific].map((r) => r.statuses[0]!.limit_remaining)).toEqual([9, 9, 19]);
  });

  it('example 9: a wildcard value, each matching value with its own state', async () => {
    const one = await client.shouldRateLimit({ domain: 'example9', descriptors: [d(['key1', 'value_1'])] });
    const two = await client.shouldRateLimit({ domain: 'example9', descriptors: [d(['key1', 'value_2'])] });
    const none = await client.shouldRateLimit({ domain: 'example9', descriptors: [d(['key1', 'other'])] });
    expect([one, two].map((r) => r.statuses[0])).toMatchObject([
      { current_limit: { requests_per_unit: 20 }, limit_remaining: 19 },
      { current_limit: { requests_per_unit: 20 }, limit_remaining: 19 },
    ]);
    expect(none.statuses[0]).toMatchObject({ current_limit: null });
  });

  it("Istio's productpage example: the path's own rule, and the general one for other paths", async () => {
    const ask = (path: string) => client.shouldRateLimit({ domain: 'productpage-ratelimit', descriptors: [d(['PATH', path])] });
    expect((await ask('/productpage')).overall_code).toBe('OK');
    const denied = await ask('/productpage');
    expect(denied.overall_code).toBe('OVER_LIMIT');
    expect(header(denied, 'Retry-After')).toMatch(/^\d+$/);
    expect((await ask('/reviews')).statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 100 }, limit_remaining: 99 });
  });

  it('Envoy Gateway-style descriptors: route key, header match and client address, nested', async () => {
    const route = ['generic_key', 'httproute/default/api/rule/0'] as [string, string];
    const ask = (user: string, ip?: string) =>
      client.shouldRateLimit({
        domain: 'gateway',
        descriptors: [ip === undefined ? d(route, ['x-user-id', user]) : d(route, ['x-user-id', user], ['remote_address', ip])],
      });
    expect((await ask('one', '10.0.0.1')).statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 2 }, limit_remaining: 1 });
    expect((await ask('one', '10.0.0.1')).overall_code).toBe('OK');
    expect((await ask('one', '10.0.0.1')).overall_code).toBe('OVER_LIMIT');
    // Another address, and the header level alone, have their own state.
    expect((await ask('one', '10.0.0.2')).overall_code).toBe('OK');
    expect((await ask('one')).statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 3 }, limit_remaining: 2 });
  });

  it('agentgateway-style MCP tool descriptors: per-descriptor hits_addend spends tokens, 0 checks without spending', async () => {
    const tool = (hits: number) => ({ ...d(['mcp.tool.name', 'search'], ['jwt.sub', 'alice']), hits_addend: { value: hits } });
    const spent = await client.shouldRateLimit({ domain: 'mcp', descriptors: [tool(300)], hits_addend: 5 });
    expect(spent.statuses[0]).toMatchObject({ code: 'OK', current_limit: { name: 'tool-tokens' }, limit_remaining: 700 });
    const check = await client.shouldRateLimit({ domain: 'mcp', descriptors: [tool(0)] });
    expect(check.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 700 });
    const tooMuch = await client.shouldRateLimit({ domain: 'mcp', descriptors: [tool(701)] });
    expect(tooMuch.overall_code).toBe('OVER_LIMIT');
    expect(metadataOf(tooMuch)).toMatchObject({ limit: 'tool-tokens', domain: 'mcp', descriptor_index: 0 });
    expect((await client.shouldRateLimit({ domain: 'mcp', descriptors: [tool(700)] })).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    // Spent out: a check now says OVER_LIMIT, and still spends nothing.
    expect((await client.shouldRateLimit({ domain: 'mcp', descriptors: [tool(0)] })).overall_code).toBe('OVER_LIMIT');
    // Another subject has its own bucket.
    const bob = await client.shouldRateLimit({ domain: 'mcp', descriptors: [{ ...d(['mcp.tool.name', 'search'], ['jwt.sub', 'bob']) }], hits_addend: 10 });
    expect(bob.statuses[0]!.limit_remaining).toBe(990);
  });
});
