import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keySlot } from '../../../src/store/redis/key-slot.js';
import type { RedisCluster } from '../../support/redis-cluster.js';
import type { RedisServer } from '../../support/redis-server.js';
import { d, header, metadataOf, type RlsClient, rlsClient, rlsConfigDir, type RlsStatus } from '../../support/rls-client.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service-process.js';
import { useRedisCluster, useRedisServer } from '../../support/use-redis.js';
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

/** Per store: the service's environment, and the keys of the store as a test can list them (none for the embedded store: its state is the service process's own). */
const stores: [string, () => Record<string, string>, (() => Promise<string[]>) | undefined][] = [
  ['embedded store', () => ({}), undefined],
  ['single Redis', () => ({ QUOTA_REDIS_URL: (redis() as RedisServer).url }), () => redisKeys(redis())],
  ['Redis Cluster', () => ({ QUOTA_REDIS_CLUSTER: (cluster() as RedisCluster).seeds.join(',') }), () => clusterKeys(cluster())],
];

async function redisKeys(server: RedisServer): Promise<string[]> {
  const client = server.client();
  const keys = await client.keys('*');
  client.disconnect();
  return keys;
}

async function clusterKeys(cluster: RedisCluster): Promise<string[]> {
  const shards = (await cluster.topology()).shards;
  return (await Promise.all(shards.map((shard) => cluster.node(shard.masterPort).keys('*')))).flat();
}

/** A Duration as Envoy reads it, in whole seconds. */
const seconds = (status: RlsStatus) => Number(status.duration_until_reset?.seconds);

describe.each(stores)('ShouldRateLimit on the %s', (_name, env, storeKeys) => {
  let service: ServiceProcess;
  let client: RlsClient;
  let metricsPort: number;
  beforeAll(async () => {
    // A generous store budget: this shared machine stalls now and then, and a stall must not become a failure mode here.
    service = startServiceProcess({ QUOTA_RLS_CONFIG: config, QUOTA_RLS_STORE_TIMEOUT_MS: '2000', QUOTA_METRICS_ADDR: '127.0.0.1:0', ...env() });
    client = rlsClient(`127.0.0.1:${await service.port}`);
    metricsPort = Number(/"port":(\d+)/.exec(await service.logged(/"msg":"metrics at GET \/metrics"/))![1]);
    await service.logged(/health SERVING/);
  }, 60_000);
  const metrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
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

  it('spend_when_over: a denied request-time call is charged too (as envoyproxy/ratelimit charges it), one token more debt each', async () => {
    // 0.001 tokens per second: each token is 1000 s of duration_until_reset (the time until the bucket is full again).
    const spend = (hits: number) => client.shouldRateLimit({ domain: 'llm', descriptors: [{ ...d(['jwt.sub', 'grace']), hits_addend: { value: hits } }] });
    const emptied = await spend(1000);
    expect(emptied.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    expect(seconds(emptied.statuses[0]!)).toBeGreaterThanOrEqual(999_998);
    expect(seconds(emptied.statuses[0]!)).toBeLessThanOrEqual(1_000_000);
    // A request-time call (request-level hits, 1): denied, and charged all the same.
    const denied = await client.shouldRateLimit({ domain: 'llm', descriptors: [d(['jwt.sub', 'grace'])] });
    expect(denied.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
    expect(seconds(denied.statuses[0]!)).toBeGreaterThanOrEqual(1_000_998);
    expect(seconds(denied.statuses[0]!)).toBeLessThanOrEqual(1_001_000);
    const again = await client.shouldRateLimit({ domain: 'llm', descriptors: [d(['jwt.sub', 'grace'])] });
    expect(seconds(again.statuses[0]!)).toBeGreaterThanOrEqual(1_001_998);
    expect(seconds(again.statuses[0]!)).toBeLessThanOrEqual(1_002_000);
  });

  it('spend_when_over: a post-response charge beyond what is left goes into debt, the next request-time check is OVER_LIMIT, the debt at most one capacity', async () => {
    const tokens = (hits: number) => client.shouldRateLimit({ domain: 'llm', descriptors: [{ ...d(['jwt.sub', 'henry']), hits_addend: { value: hits } }] });
    // Before the model call: a check (hits 0), then the response's 900 tokens after it.
    expect((await tokens(0)).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 1000 });
    expect((await tokens(900)).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 100 });
    expect((await tokens(0)).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 100 });
    // The next response used 300, with 100 left: the answer (read by nobody) says OVER_LIMIT, and the 300 are spent.
    const charged = await tokens(300);
    expect(charged.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
    const check = await tokens(0);
    expect(check.overall_code).toBe('OVER_LIMIT');
    // 200 tokens of debt: full again after 1200 tokens at 0.001 per second.
    expect(seconds(check.statuses[0]!)).toBeGreaterThanOrEqual(1_199_998);
    expect(seconds(check.statuses[0]!)).toBeLessThanOrEqual(1_200_000);
    // A huge charge: the debt stops at one capacity (1000 tokens below zero), 2000 tokens to full.
    await tokens(50_000);
    const capped = await tokens(0);
    expect(capped.overall_code).toBe('OVER_LIMIT');
    expect(seconds(capped.statuses[0]!)).toBeGreaterThanOrEqual(1_999_998);
    expect(seconds(capped.statuses[0]!)).toBeLessThanOrEqual(2_000_000);
  });

  it('spend_when_over: a descriptor with a limit override on such a rule spends when over too', async () => {
    const charge = (hits: number) =>
      client.shouldRateLimit({
        domain: 'llm',
        descriptors: [{ ...d(['jwt.sub', 'olga']), limit: { requests_per_unit: 10, unit: 'DAY' }, hits_addend: { value: hits } }],
      });
    expect((await charge(8)).statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 10, unit: 'DAY' }, limit_remaining: 2 });
    // 5 with 2 left: over, and charged (the window counts past its limit).
    expect((await charge(5)).overall_code).toBe('OVER_LIMIT');
    // A check of one more is over now; had the 5 not been charged, 2 would be left.
    expect((await charge(0)).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
  });

  it('duration_until_reset: a fixed window reports the time to its end; a token bucket the time until it is full again', async () => {
    const before = Date.now();
    const window = await client.shouldRateLimit({ domain: 'ours', descriptors: [d(['user', 'reset'])] });
    const after = Date.now();
    // Hour windows are aligned to the Unix epoch.
    const reset = window.statuses[0]!.duration_until_reset!;
    const resetMs = Number(reset.seconds) * 1000 + reset.nanos / 1e6;
    expect(resetMs).toBeLessThanOrEqual(3_600_000 - (before % 3_600_000));
    expect(resetMs).toBeGreaterThanOrEqual(3_600_000 - (after % 3_600_000) - 1);
    // tool-tokens: 300 of 1000 spent at 0.001 per second refill: 300,000 s to full; its rate projected onto the shortest unit holding at least 1 (3.6 per hour, rounded down).
    const bucket = await client.shouldRateLimit({
      domain: 'mcp',
      descriptors: [{ ...d(['mcp.tool.name', 'fetch'], ['jwt.sub', 'ivan']), hits_addend: { value: 300 } }],
    });
    expect(bucket.statuses[0]).toMatchObject({ code: 'OK', current_limit: { name: 'tool-tokens', requests_per_unit: 3, unit: 'HOUR' }, limit_remaining: 700 });
    expect(seconds(bucket.statuses[0]!)).toBeGreaterThanOrEqual(299_998);
    expect(seconds(bucket.statuses[0]!)).toBeLessThanOrEqual(300_000);
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

  it('two descriptors in different hash slots of one Redis Cluster master: one all-or-nothing decision, no error', async () => {
    // Hash tags whose slots differ but lie below 5000: on a 3-master cluster with the slots split evenly, one master serves both.
    const tag = (key: string, from: number) => {
      for (let i = from; ; i++) if (keySlot(`{${key}=m${i}}`) < 5000) return [`m${i}`, keySlot(`{${key}=m${i}}`)] as const;
    };
    const [user, userSlot] = tag('user', 0);
    let [tenant, tenantSlot] = tag('tenant', 0);
    for (let i = 1; tenantSlot === userSlot; i++) [tenant, tenantSlot] = tag('tenant', i);
    const ask = () => client.shouldRateLimit({ domain: 'ours', descriptors: [d(['user', user]), d(['tenant', tenant])] });
    expect((await ask()).statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 4],
      ['OK', 1],
    ]);
    await ask();
    const denied = await ask();
    expect(denied.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 3],
      ['OVER_LIMIT', 0],
    ]);
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

  it.each([
    ['an empty key', [['', 'v']], 'descriptors[1].entries[0].key: must not be empty'],
    ['a huge value', [['key1', 'x'.repeat(1_000_000)]], 'descriptors[1].entries[0].value: must be at most 1024 bytes, got 1000000'],
    ['1000 entries', Array.from({ length: 1000 }, (_, i) => [`k${i}`, 'v']), 'descriptors[1].entries: at most 32, got 1000'],
    ['a control character', [['key1', 'a\nb']], 'descriptors[1].entries[0].value: must not contain control characters'],
  ] as [string, [string, string][], string][])(
    'hostile: %s beside a valid descriptor is INVALID_ARGUMENT naming the field, nothing is written or spent, and the service serves on',
    async (what, entries, details) => {
      const witness = d(['key1', `hostile witness ${what}`]);
      const before = await storeKeys?.();
      await expect(client.shouldRateLimit({ domain: 'example8', descriptors: [witness, d(...entries)] })).rejects.toMatchObject({ code: 3, details });
      // No key appeared (keys of other tests' per-second windows may lapse meanwhile).
      if (before !== undefined) expect((await storeKeys!()).filter((key) => !before.includes(key))).toEqual([]);
      // The valid descriptor beside it was not charged: a check-only call still sees all 10.
      const checked = await client.shouldRateLimit({ domain: 'example8', descriptors: [{ ...witness, hits_addend: { value: '0' } }] });
      expect(checked.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 10 });
    },
  );

  it('hostile: values with {, }, : and = are valid, each its own state inside its hash tag', async () => {
    const values = ['a}:{b', '{', '}', 'x:y', 'a=b,key2=c', '{a}'];
    for (const value of values) {
      const answer = await client.shouldRateLimit({ domain: 'example8', descriptors: [d(['key1', `braces ${value}`])] });
      expect(answer.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 9 });
    }
    const keys = (await storeKeys?.())?.filter((key) => key.includes('braces'));
    if (keys !== undefined) {
      expect(keys).toHaveLength(values.length);
      for (const key of keys) expect(key).toMatch(/^rl:v1:rls:example8:rule:key1:fixed_window:\{key1=braces[^{}]+\}:minute$/);
    }
  });
});
