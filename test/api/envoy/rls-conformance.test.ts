import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRlsConfig, parseRlsFile, readRlsTexts } from '../../../src/api/envoy/rls-config.js';
import type { RedisCluster } from '../../support/redis-cluster.js';
import type { RedisServer } from '../../support/redis-server.js';
import { d, type RlsResponse, ruleMetadataOf } from '../../support/rls-client.js';
import { useRlsService } from '../../support/rls-service.js';
import { useRedisCluster, useRedisServer } from '../../support/use-redis.js';
import { README_EXAMPLES } from './rls-configs.js';

/**
 * Conformance with envoyproxy/ratelimit, from its published configuration
 * files (its integration test directory, its end-to-end example directory,
 * its README examples; fixtures/) and the answers its documentation and its
 * service give for them: every file loads as it is, and each rule answers as
 * there, on the embedded store, one Redis and a 3+3 Redis Cluster.
 */
const FIXTURES = join(import.meta.dirname, 'fixtures');
const UINT32_MAX = 4_294_967_295;

describe('the reference configuration files load as they are', () => {
  it.each(readdirSync(FIXTURES))('%s', (name) => {
    expect(() => parseRlsFile(readFileSync(join(FIXTURES, name), 'utf8'), name)).not.toThrow();
  });

  it('the whole fixtures directory, as one QUOTA_RLS_CONFIG', async () => {
    const config = parseRlsConfig(await readRlsTexts(FIXTURES));
    expect([...config.domains.keys()].sort()).toEqual([
      'another',
      'basic',
      'empty',
      'example10',
      'example10_wildcard',
      'example11',
      'example11_metrics',
      'mongo_cps',
      'rl',
      'share-threshold-test',
    ]);
  });

  it('the README examples', () => {
    expect(parseRlsConfig(new Map(Object.entries(README_EXAMPLES))).domains.size).toBe(Object.keys(README_EXAMPLES).length);
  });

  it('descriptors: with nothing after it is an empty list, at the top and below', () => {
    expect(parseRlsFile('domain: a\ndescriptors:\n', 'a.yaml').root.byKey.size).toBe(0);
    expect(() => parseRlsFile('domain: a\ndescriptors:\n  - key: k\n    descriptors:\n', 'a.yaml')).not.toThrow();
  });

  it('share_threshold is refused on a value without a wildcard, naming the key', () => {
    expect(() =>
      parseRlsFile(
        'domain: a\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n',
        'a.yaml',
      ),
    ).toThrow(/descriptor "k_v" \(descriptors\[0\]\) share_threshold: only meaningful on a descriptor whose value has a \* wildcard/);
  });

  it('a key the format does not have is refused with its name and its line', () => {
    expect(() => parseRlsFile('domain: a\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n    burst: 3\n', 'a.yaml')).toThrow(
      /a\.yaml: domain "a": descriptor "k" \(descriptors\[0\]\) .*Unrecognized key: "burst" \(line 5\)/,
    );
  });

  it('metadata must hold what a Struct holds', () => {
    expect(() => parseRlsFile('domain: a\ndescriptors:\n  - key: k\n    metadata: { a: { b: [1, "x", true, null] } }\n', 'a.yaml')).not.toThrow();
    expect(() => parseRlsFile('domain: a\ndescriptors:\n  - key: k\n    metadata: 3\n', 'a.yaml')).toThrow(/metadata/);
  });
});

const redis = useRedisServer();
const cluster = useRedisCluster();
const stores: [string, () => Record<string, string>][] = [
  ['embedded store', () => ({})],
  ['single Redis', () => ({ QUOTA_REDIS_URL: (redis() as RedisServer).url })],
  ['Redis Cluster', () => ({ QUOTA_REDIS_CLUSTER: (cluster() as RedisCluster).seeds.join(',') })],
];

const seconds = (response: RlsResponse, i = 0) => Number(response.statuses[i]?.duration_until_reset?.seconds ?? -1);
/** Seconds from now to the end of the current window of `unitSeconds`, aligned to the Unix epoch. */
const untilWindowEnd = (unitSeconds: number) => unitSeconds - ((Date.now() / 1000) % unitSeconds);

describe.each(stores)('the reference configurations answer as documented, on the %s', (_name, env) => {
  const { client, metrics } = useRlsService(() => ({
    QUOTA_RLS_CONFIG: FIXTURES,
    QUOTA_RLS_STORE_TIMEOUT_MS: '2000',
    QUOTA_METRICS_ADDR: '127.0.0.1:0',
    ...env(),
  }));
  const ask = (domain: string, ...descriptors: ReturnType<typeof d>[]) => client.shouldRateLimit({ domain, descriptors });

  it('basic: 50 per second on key1, with no name; one per minute on one_per_minute', async () => {
    const first = await ask('basic', d(['key1', 'foo']));
    expect(first.overall_code).toBe('OK');
    expect(first.statuses[0]).toMatchObject({ code: 'OK', current_limit: { name: '', requests_per_unit: 50, unit: 'SECOND' }, limit_remaining: 49 });
    expect((await ask('basic', d(['one_per_minute', 'a']))).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    const second = await ask('basic', d(['one_per_minute', 'a']));
    expect(second.overall_code).toBe('OVER_LIMIT');
    expect(seconds(second)).toBeLessThanOrEqual(60);
    // Another value has its own counter.
    expect((await ask('basic', d(['one_per_minute', 'b']))).overall_code).toBe('OK');
  });

  it('another: unnamed rules answer an empty name; a check on an untouched window answers the time to its end', async () => {
    const key3 = await ask('another', d(['key3', 'x']));
    expect(key3.statuses[0]).toMatchObject({ code: 'OK', current_limit: { name: '', requests_per_unit: 10, unit: 'HOUR' }, limit_remaining: 9 });
    const check = await client.shouldRateLimit({ domain: 'another', descriptors: [{ ...d(['key4', 'untouched']), hits_addend: { value: 0 } }] });
    expect(check.statuses[0]).toMatchObject({ code: 'OK', current_limit: { name: '', requests_per_unit: 20, unit: 'DAY' }, limit_remaining: 20 });
    expect(Math.abs(seconds(check) - untilWindowEnd(86_400))).toBeLessThanOrEqual(2);
    const minute = await client.shouldRateLimit({ domain: 'another', descriptors: [{ ...d(['key2', 'untouched']), hits_addend: { value: 0 } }] });
    expect(Math.abs(seconds(minute) - untilWindowEnd(60))).toBeLessThanOrEqual(2);
  });

  it.each([['share-threshold-test'], ['example11']])('%s: every files/* value shares one counter; files_no_share/* values count apart', async (domain) => {
    for (let i = 0; i < 5; i++) expect((await ask(domain, d(['files', 'files/a.pdf']))).overall_code).toBe('OK');
    for (let i = 0; i < 5; i++) expect((await ask(domain, d(['files', 'files/b.csv']))).overall_code).toBe('OK');
    const shared = await ask(domain, d(['files', 'files/c.txt']));
    expect(shared.overall_code).toBe('OVER_LIMIT');
    expect(shared.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0, current_limit: { requests_per_unit: 10, unit: 'HOUR' } });
    for (let i = 0; i < 10; i++) expect((await ask(domain, d(['files_no_share', 'files_no_share/a.pdf']))).overall_code).toBe('OK');
    expect((await ask(domain, d(['files_no_share', 'files_no_share/a.pdf']))).overall_code).toBe('OVER_LIMIT');
    const apart = await ask(domain, d(['files_no_share', 'files_no_share/b.csv']));
    expect(apart.overall_code).toBe('OK');
    expect(apart.statuses[0]!.limit_remaining).toBe(9);
  });

  it('example11_metrics: api/* shares one counter below it too', async () => {
    expect((await ask('example11_metrics', d(['route', 'api/v1'], ['method', 'GET']))).statuses[0]!.limit_remaining).toBe(59);
    expect((await ask('example11_metrics', d(['route', 'api/v2'], ['method', 'GET']))).statuses[0]!.limit_remaining).toBe(58);
    // Another method is another descriptor: a counter of its own.
    expect((await ask('example11_metrics', d(['route', 'api/v2'], ['method', 'POST']))).statuses[0]!.limit_remaining).toBe(59);
  });

  it('example10: value_to_metric puts the request values in the rule label', async () => {
    expect((await ask('example10', d(['route', 'api'], ['http_method', 'GET'], ['subject_id', '123']))).statuses[0]!.limit_remaining).toBe(59);
    await ask('example10', d(['route', 'web'], ['http_method', 'POST'], ['subject_id', '456']));
    await ask('example10_wildcard', d(['user', 'alice'], ['action', 'readfile'], ['resource', 'documents']));
    const text = await metrics();
    expect(text).toContain('quota_rls_descriptors_total{domain="example10",rule="route_api.http_method_GET.subject_id",result="allowed"} 1');
    expect(text).toContain('quota_rls_descriptors_total{domain="example10",rule="route_web.http_method_POST.subject_id",result="allowed"} 1');
    expect(text).toContain('quota_rls_descriptors_total{domain="example10_wildcard",rule="user_alice.action_readfile.resource",result="allowed"} 1');
  });

  it('rl (the end-to-end example): quota_mode descriptors hold the request back only when all are over, and pass their metadata', async () => {
    const both = () => ask('rl', d(['service', 'service_1']), d(['service', 'service_2']));
    const first = await both();
    expect(first.overall_code).toBe('OK');
    expect(first.statuses.map((s) => s.code)).toEqual(['OK', 'OK']);
    // Maps merge; for the same leaf the first descriptor's value stays.
    expect(ruleMetadataOf(first)).toEqual({ service_with_quota: { name: 'service_1' } });
    const second = await both();
    expect(second.overall_code).toBe('OK');
    expect(second.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    expect(ruleMetadataOf(second)).toEqual({ service_with_quota: { name: 'service_2' } });
    const third = await both();
    expect(third.overall_code).toBe('OVER_LIMIT');
    expect(third.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT']);
    expect(ruleMetadataOf(third)).toBeUndefined();
    // Alone, an over quota descriptor is all the quota descriptors there are.
    expect((await ask('rl', d(['service', 'service_1']))).overall_code).toBe('OVER_LIMIT');
    // An ordinary descriptor that passes does not save quota descriptors that are all over.
    const mixed = await ask('rl', d(['service', 'service_1']), d(['unspec', 'u1']), d(['service', 'service_1']));
    expect(mixed.overall_code).toBe('OVER_LIMIT');
  });

  it('rl: replaces, a banned value, shadow mode, unlimited and names as the example sets them', async () => {
    // category=account replaces the rule named bkthomps: that descriptor answers OK with no limit, however often.
    for (let i = 0; i < 3; i++) {
      const replaced = await ask('rl', d(['category', 'account']), d(['foo', 'x'], ['bar', 'bkthomps']));
      expect(replaced.overall_code).toBe('OK');
      expect(replaced.statuses[1]).toMatchObject({ code: 'OK', current_limit: null });
      expect(replaced.statuses[0]!.current_limit).toMatchObject({ name: '', requests_per_unit: 4, unit: 'MINUTE' });
    }
    // Alone, bkthomps is 1 per minute and named.
    const named = await ask('rl', d(['foo', 'y'], ['bar', 'bkthomps']));
    expect(named.statuses[0]).toMatchObject({ code: 'OK', current_limit: { name: 'bkthomps', requests_per_unit: 1, unit: 'MINUTE' }, limit_remaining: 0 });
    expect((await ask('rl', d(['foo', 'y'], ['bar', 'bkthomps']))).overall_code).toBe('OVER_LIMIT');
    // banned: 0 per minute, unless the override destination replaces banned_limit.
    expect((await ask('rl', d(['foo', 'z'], ['bar', 'banned']))).overall_code).toBe('OVER_LIMIT');
    const unbanned = await ask('rl', d(['source_cluster', 'proxy'], ['destination_cluster', 'override']), d(['foo', 'z'], ['bar', 'banned']));
    expect(unbanned.overall_code).toBe('OK');
    expect(unbanned.statuses[1]).toMatchObject({ code: 'OK', current_limit: null });
    // shady is a shadow rule: 3 per minute, and the fourth still answers OK.
    for (let i = 0; i < 4; i++) expect((await ask('rl', d(['foo', 's'], ['baz', 'shady']))).overall_code).toBe('OK');
    // bay and qux are unlimited.
    for (const descriptor of [d(['foo', 'q'], ['bay', 'any']), d(['qux', 'any'])]) {
      expect((await ask('rl', descriptor)).statuses[0]).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: UINT32_MAX });
    }
    // fake_name is named as the file names it.
    expect((await ask('rl', d(['source_cluster', 'proxy'], ['destination_cluster', 'fake']))).statuses[0]!.current_limit).toMatchObject({
      name: 'fake_name',
      requests_per_unit: 2,
    });
  });

  it('mongo_cps (the example config.yaml): 500 per second per database', async () => {
    expect((await ask('mongo_cps', d(['database', 'users']))).statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { name: '', requests_per_unit: 500, unit: 'SECOND' },
      limit_remaining: 499,
    });
    expect((await ask('mongo_cps', d(['database', 'default']))).statuses[0]!.limit_remaining).toBe(499);
  });

  it('empty: a domain without descriptors answers OK without a limit', async () => {
    expect((await ask('empty', d(['anything', 'x']))).statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
  });
});
