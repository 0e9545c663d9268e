import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisCluster } from '../support/redis-cluster.js';
import type { RedisServer } from '../support/redis-server.js';
import { d, header, metadataOf, type RlsClient, rlsClient, rlsConfigDir } from '../support/rls-client.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';
import { ECOSYSTEM_EXAMPLES, README_EXAMPLES } from './rls-configs.js';

/**
 * Envoy's rate limit service against a real service process, called by a
 * client built from Envoy's protos, on the embedded store, a single Redis
 * and a 3+3 Redis Cluster: the same assertions on each.
 */
const config = rlsConfigDir({ ...README_EXAMPLES, ...ECOSYSTEM_EXAMPLES });
const redis = useRedisServer();
const cluster = useRedisCluster();
const UINT32_MAX = 4_294_967_295;

const stores: [string, () => Record<string, string>][] = [
  ['embedded store', () => ({})],
  ['single Redis', () => ({ QUOTA_REDIS_URL: (redis() as RedisServer).url })],
  ['Redis Cluster', () => ({ QUOTA_REDIS_CLUSTER: (cluster() as RedisCluster).seeds.join(',') })],
];

describe.each(stores)('ShouldRateLimit on the %s', (_name, env) => {
  let service: ServiceProcess;
  let client: RlsClient;
  beforeAll(async () => {
    // A generous store budget: this shared machine stalls now and then, and a stall must not become a failure mode here.
    service = startServiceProcess({ QUOTA_RLS_CONFIG: config, QUOTA_RLS_STORE_TIMEOUT_MS: '2000', ...env() });
    client = rlsClient(`127.0.0.1:${await service.port}`);
    await service.logged(/health SERVING/);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    service?.signal('SIGKILL');
    await service?.exit;
  });

  it('example 1: a value-specific rule per database, counted per descriptor', async () => {
    const users = await client.shouldRateLimit({ domain: 'mongo_cps', descriptors: [d(['database', 'users'])] });
    expect(users.overall_code).toBe('OK');
    expect(users.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 500, unit: 'SECOND', name: 'database_users' },
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

  it('spend_when_over: a charge after the response is spent even over the budget, into debt; the other rules stay all or nothing', async () => {
    const tokens = (hits: number) => ({ ...d(['jwt.sub', 'carol']), hits_addend: { value: hits } });
    const route = d(['route', 'chat']);
    const before = await client.shouldRateLimit({ domain: 'llm', descriptors: [tokens(0), route] });
    expect(before.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 1000],
      ['OK', 99],
    ]);
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [tokens(800)] })).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 200 });
    // 500 more than the 200 left: over, and charged all the same (debt of 300); the route rule spends nothing.
    const over = await client.shouldRateLimit({ domain: 'llm', descriptors: [tokens(500), route] });
    expect(over.overall_code).toBe('OVER_LIMIT');
    expect(over.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OVER_LIMIT', 0],
      ['OK', 99],
    ]);
    // In debt: even a check of 1 is over now; without the charge 200 would be left.
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [tokens(0)] })).overall_code).toBe('OVER_LIMIT');
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [{ ...d(['jwt.sub', 'carol']), hits_addend: { value: 1 } }] })).overall_code).toBe(
      'OVER_LIMIT',
    );
    // More hits than the whole budget: charged too, the debt at most one budget deep; another subject is untouched.
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [tokens(5000)] })).overall_code).toBe('OVER_LIMIT');
    expect(
      (await client.shouldRateLimit({ domain: 'llm', descriptors: [{ ...d(['jwt.sub', 'dave']), hits_addend: { value: 0 } }] })).statuses[0],
    ).toMatchObject({
      code: 'OK',
      limit_remaining: 1000,
    });
    // A fresh subject asking for more than the whole budget at once: over, and charged all the same.
    const erin = (hits: number) => ({ ...d(['jwt.sub', 'erin']), hits_addend: { value: hits } });
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [erin(5000)] })).overall_code).toBe('OVER_LIMIT');
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [erin(0)] })).overall_code).toBe('OVER_LIMIT');
    // The route rule was spent only by the first call.
    expect((await client.shouldRateLimit({ domain: 'llm', descriptors: [route] })).statuses[0]!.limit_remaining).toBe(98);
  });

  it('a fixed window of 90 s (our addition) reports its rate projected onto an hour', async () => {
    const response = await client.shouldRateLimit({ domain: 'mcp', descriptors: [d(['tool', 'search'])] });
    expect(response.statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 160, unit: 'HOUR' }, limit_remaining: 3 });
  });

  it('all or nothing across two rules: the passing descriptor is unchanged after a rejection', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'ours', descriptors: [d(['user', 'u1']), d(['tenant', 't1'])] });
    expect((await ask()).statuses.map((s) => s.limit_remaining)).toEqual([4, 1]);
    expect((await ask()).statuses.map((s) => s.limit_remaining)).toEqual([3, 0]);
    const denied = await ask();
    expect(denied.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 3],
      ['OVER_LIMIT', 0],
    ]);
    expect((await client.shouldRateLimit({ domain: 'ours', descriptors: [d(['user', 'u1'])] })).statuses[0]!.limit_remaining).toBe(2);
  });

  it('a limit override in the descriptor replaces the configured limit for that request', async () => {
    const override = (n: number) => ({ ...d(['user', 'u-override']), limit: { requests_per_unit: n, unit: 'HOUR' } });
    const first = await client.shouldRateLimit({ domain: 'ours', descriptors: [override(1)] });
    expect(first.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 1, unit: 'HOUR' }, limit_remaining: 0 });
    expect((await client.shouldRateLimit({ domain: 'ours', descriptors: [override(1)] })).overall_code).toBe('OVER_LIMIT');
    // The configured rule (5 per hour) was never charged by the overridden requests.
    expect((await client.shouldRateLimit({ domain: 'ours', descriptors: [d(['user', 'u-override'])] })).statuses[0]!.limit_remaining).toBe(4);
  });

  it('a week unit and a sliding window log with a window of an hour', async () => {
    const week = await client.shouldRateLimit({ domain: 'ours', descriptors: [d(['week', 'w'])] });
    expect(week.statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 3, unit: 'WEEK' }, limit_remaining: 2 });
    const sliding = [1, 2, 3].map(() => client.shouldRateLimit({ domain: 'ours', descriptors: [d(['sliding', 's'])] }));
    expect((await Promise.all(sliding)).map((r) => r.overall_code).sort()).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  it('the same descriptor twice in one request counts twice', async () => {
    const twice = await client.shouldRateLimit({ domain: 'ours', descriptors: [d(['user', 'twice']), d(['user', 'twice'])] });
    expect(twice.statuses.map((s) => s.limit_remaining)).toEqual([3, 3]);
  });

  it('OVER_LIMIT carries the JSON body of the HTTP adapters, Retry-After, the RateLimit headers and metadata naming the limit', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'ours', descriptors: [d(['tenant', 'body'])] });
    const ok = await ask();
    expect(header(ok, 'RateLimit-Policy')).toBe('"tenant";q=2');
    expect(header(ok, 'RateLimit')).toMatch(/^"tenant";r=1;t=\d+$/);
    expect(header(ok, 'Retry-After')).toBeUndefined();
    await ask();
    const denied = await ask();
    const body = JSON.parse(denied.raw_body.toString());
    expect(body).toMatchObject({ error: 'rate_limit_exceeded', policy: 'ours', limit: 'tenant' });
    expect(body.message).toContain('"tenant"');
    expect(body.retry_after_ms).toBeGreaterThan(0);
    expect(Number(header(denied, 'Retry-After'))).toBe(Math.max(1, Math.ceil(body.retry_after_ms / 1000)));
    expect(header(denied, 'content-type')).toBe('application/json');
    expect(header(denied, 'RateLimit')).toBe(`"tenant";r=0;t=${header(denied, 'Retry-After')}`);
    expect(metadataOf(denied)).toMatchObject({ domain: 'ours', limit: 'tenant', descriptor_index: 0, source: 'store' });
  });

  it('an unknown domain answers OK with no limit; an empty domain or no descriptors is INVALID_ARGUMENT', async () => {
    const unknown = await client.shouldRateLimit({ domain: 'nobody-configured-this', descriptors: [d(['a', 'b']), d(['c', 'd'])] });
    expect(unknown).toMatchObject({
      overall_code: 'OK',
      statuses: [
        { code: 'OK', current_limit: null },
        { code: 'OK', current_limit: null },
      ],
    });
    await expect(client.shouldRateLimit({ domain: '', descriptors: [d(['a', 'b'])] })).rejects.toMatchObject({ code: 3, details: 'domain: must not be empty' });
    await expect(client.shouldRateLimit({ domain: 'ours', descriptors: [] })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/^descriptors: /),
    });
  });
});
