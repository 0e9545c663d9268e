import { describe, expect, it } from 'vitest';
import { keySlot } from '../../../src/store/redis/key-slot.js';
import { d, header, metadataOf } from '../../support/rls-client.js';
import { rlsService, rlsStores, seconds } from './should-rate-limit-fixture.js';

/**
 * ShouldRateLimit's answers on the embedded store, a single Redis and a 3+3
 * Redis Cluster, the same assertions on each: the time until reset, all or
 * nothing across rules and hash slots, limit overrides, units, the OVER_LIMIT
 * body and headers, and invalid or hostile input. (The README and ecosystem
 * examples: should-rate-limit-examples.test.ts; debt: should-rate-limit-debt.test.ts.)
 */
const stores = rlsStores();

describe.each(stores)('ShouldRateLimit on the %s', (_name, env, storeKeys) => {
  const { client } = rlsService(env);

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
