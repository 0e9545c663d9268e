import { describe, expect, it } from 'vitest';
import { d } from '../../support/rls-client.js';
import { rlsService, rlsStores, seconds } from './should-rate-limit-fixture.js';

/**
 * ShouldRateLimit on rules with spend_when_over: a charge is spent even over
 * the budget, into debt at most one budget deep, on the embedded store, a
 * single Redis and a 3+3 Redis Cluster: the same assertions on each.
 */
const stores = rlsStores();

describe.each(stores)('ShouldRateLimit on the %s', (_name, env) => {
  const { client } = rlsService(env);

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
});
