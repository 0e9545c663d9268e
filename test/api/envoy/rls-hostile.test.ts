import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { ChannelCredentials, Client, Metadata, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseRlsConfig } from '../../../src/api/envoy/rls-config.js';
import { SHOULD_RATE_LIMIT_PATH } from '../../../src/api/envoy/envoy-codec.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { d, type RlsClient, rlsClient, type RlsRequest } from '../../support/rls-client.js';
import { clusterFixture, type StoreFixture } from '../../support/store-fixtures.js';
import { bothStores, useRedisCluster, useRedisServer } from '../../support/use-redis.js';
import { README_EXAMPLES } from './rls-configs.js';

/**
 * Hostile descriptors: each gets INVALID_ARGUMENT naming the field, nothing is
 * written, and the service keeps serving. Values with `{`, `}`, `:` (and the
 * separators of the key layout) are valid: they are kept apart and inside
 * their hash tag. On the embedded store, a single Redis and a 3+3 Redis
 * Cluster, with the service in this process so that the test reads the
 * store's keys (should-rate-limit.test.ts runs a service process).
 */
const config = parseRlsConfig(
  new Map([
    [
      'edge.yaml',
      'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n    descriptors:\n      - key: k2\n        rate_limit: { unit: hour, requests_per_unit: 5 }\n',
    ],
    ['example3.yaml', README_EXAMPLES['example3.yaml']!],
  ]),
);
const redis = useRedisServer();
const cluster = useRedisCluster();
const stores: [string, () => StoreFixture][] = [...bothStores(redis), ['Redis Cluster', () => clusterFixture(cluster())]];

/** A RateLimitRequest with raw bytes where a client would only send text. */
function rawRequest(domain: string, entries: [Uint8Array | string, Uint8Array | string][]): Uint8Array {
  const writer = new BinaryWriter().uint32(10).string(domain).uint32(18).fork();
  for (const [key, value] of entries) {
    writer.uint32(10).fork();
    typeof key === 'string' ? writer.uint32(10).string(key) : writer.uint32(10).bytes(key);
    typeof value === 'string' ? writer.uint32(18).string(value) : writer.uint32(18).bytes(value);
    writer.join();
  }
  return writer.join().finish();
}

describe.each(stores)('hostile descriptors on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  let service: TestService;
  let client: RlsClient;
  let raw: Client;
  beforeAll(async () => {
    f = makeFixture();
    await f.store.ready();
    service = await startTestService(f.store, undefined, undefined, { config: () => config, timeoutMs: 2_000, shadowMode: false, rateLimitHeaders: true });
    client = rlsClient(`127.0.0.1:${service.server.port}`);
    raw = new Client(`127.0.0.1:${service.server.port}`, ChannelCredentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    raw?.close();
    await service?.stop();
    await f?.store.close();
  });
  beforeEach(async () => {
    await f.reset();
  });

  const refused: [string, RlsRequest, string][] = [
    ['an empty key', { domain: 'edge', descriptors: [d(['', 'v'])] }, 'descriptors[0].entries[0].key: must not be empty'],
    ['an empty value', { domain: 'edge', descriptors: [d(['k', ''])] }, 'descriptors[0].entries[0].value: must not be empty'],
    [
      'a huge value',
      { domain: 'edge', descriptors: [d(['k', 'x'.repeat(1_000_000)])] },
      'descriptors[0].entries[0].value: must be at most 1024 bytes, got 1000000',
    ],
    ['a huge key', { domain: 'edge', descriptors: [d(['k'.repeat(300), 'v'])] }, 'descriptors[0].entries[0].key: must be at most 256 bytes, got 300'],
    [
      '1000 entries',
      { domain: 'edge', descriptors: [{ entries: Array.from({ length: 1000 }, (_, i) => ({ key: `k${i}`, value: 'v' })) }] },
      'descriptors[0].entries: at most 32, got 1000',
    ],
    ['1000 descriptors', { domain: 'edge', descriptors: Array.from({ length: 1000 }, () => d(['k', 'v'])) }, 'descriptors: at most 64, got 1000'],
    [
      'a descriptor without entries',
      { domain: 'edge', descriptors: [d(['k', 'v']), { entries: [] }] },
      'descriptors[1].entries: at least one entry is required',
    ],
    ['a control character', { domain: 'edge', descriptors: [d(['k', 'a\nb'])] }, 'descriptors[0].entries[0].value: must not contain control characters'],
    [
      'hits beyond 2^53',
      { domain: 'edge', descriptors: [{ ...d(['k', 'v']), hits_addend: { value: '18446744073709551615' } }] },
      'descriptors[0].hits_addend: must be at most 9007199254740991',
    ],
    [
      'an override without a unit',
      { domain: 'edge', descriptors: [{ ...d(['k', 'v']), limit: { requests_per_unit: 5, unit: 'UNKNOWN' } }] },
      'descriptors[0].limit.unit: must be a known unit (SECOND to YEAR, or WEEK), got 0',
    ],
    ['a huge domain', { domain: 'd'.repeat(100_000), descriptors: [d(['k', 'v'])] }, 'domain: must be at most 256 bytes, got 100000'],
  ];

  it.each(refused)('%s: INVALID_ARGUMENT naming the field, nothing written, the service serves on', async (_what, request, details) => {
    // A valid descriptor beside the bad one is not decided either.
    const withValid = { ...request, descriptors: [d(['k', 'fine']), ...request.descriptors] };
    const shifted = details.replace(/^descriptors\[(\d+)\]/, (_m, i: string) => `descriptors[${Number(i) + 1}]`);
    const expected = request.descriptors.length >= 64 ? 'descriptors: at most 64, got 1001' : shifted;
    await expect(client.shouldRateLimit(withValid)).rejects.toMatchObject({ code: 3, details: expected });
    await expect(client.shouldRateLimit(request)).rejects.toMatchObject({ code: 3, details });
    expect(await f.keys()).toEqual([]);
    expect((await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['k', 'after'])] })).statuses[0]!.limit_remaining).toBe(4);
  });

  it('bytes that are not valid UTF-8: INVALID_ARGUMENT, never the text a lenient decoder makes of them', async () => {
    const bad = new Uint8Array([0x61, 0xff]);
    const outcome = await new Promise<{ code: number; details: string }>((resolve) =>
      raw.makeUnaryRequest(
        SHOULD_RATE_LIMIT_PATH,
        (bytes: Uint8Array) => Buffer.from(bytes),
        (bytes: Buffer) => bytes,
        rawRequest('edge', [['k', bad]]),
        new Metadata(),
        (error: ServiceError | null) => resolve(error ? { code: error.code, details: error.details } : { code: 0, details: '' }),
      ),
    );
    expect(outcome).toEqual({ code: 3, details: 'descriptors[0].entries[0].value: not valid UTF-8' });
    expect(await f.keys()).toEqual([]);
  });

  it('values with {, }, :, = and , are valid, stay inside their own hash tag and never collide', async () => {
    const values = ['a}:{b', '{', '}', 'x:y', 'a=b,k2=c', 'a', '{a}', 'sha256:abc'];
    for (const value of values) expect((await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['k', value])] })).statuses[0]!.limit_remaining).toBe(4);
    // Two entries are another descriptor than one entry whose value spells them.
    expect((await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['k', 'a'], ['k2', 'c'])] })).statuses[0]!.limit_remaining).toBe(4);
    const keys = await f.keys();
    expect(keys).toHaveLength(values.length + 1);
    for (const key of keys) expect(key).toMatch(/^rl:v1:rls:edge:rule:k(\/k2)?:fixed_window:\{[^{}]+\}:hour$/);
  });

  it('a very long descriptor is keyed by its SHA-256 inside the hash tag', async () => {
    const long = d(['k', 'v'.repeat(1000)]);
    expect((await client.shouldRateLimit({ domain: 'edge', descriptors: [long] })).statuses[0]!.limit_remaining).toBe(4);
    expect((await client.shouldRateLimit({ domain: 'edge', descriptors: [long] })).statuses[0]!.limit_remaining).toBe(3);
    expect(await f.keys()).toEqual([expect.stringMatching(/^rl:v1:rls:edge:rule:k:fixed_window:\{sha256:[A-Za-z0-9_-]{43}\}:hour$/)]);
  });

  it('a blocked value (requests_per_unit 0): OVER_LIMIT, and no key written', async () => {
    const blocked = await client.shouldRateLimit({ domain: 'edge_proxy_per_ip', descriptors: [d(['remote_address', '50.0.0.5'])] });
    expect(blocked.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 0 }, limit_remaining: 0 });
    // Beside a descriptor that would pass: all or nothing, so neither writes.
    const both = await client.shouldRateLimit({
      domain: 'edge_proxy_per_ip',
      descriptors: [d(['remote_address', '50.0.0.1']), d(['remote_address', '50.0.0.5'])],
    });
    expect(both.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT']);
    expect(await f.keys()).toEqual([]);
  });
});
