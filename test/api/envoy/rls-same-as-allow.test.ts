import fc from 'fast-check';
import { parsePolicies } from '@quota-service/core';
import { describe, expect, it } from 'vitest';
import { QuotaEngine } from '../../../src/engine/engine.js';
import { decideRls } from '../../../src/api/envoy/rls-decide.js';
import { parseRlsConfig } from '../../../src/api/envoy/rls-config.js';
import { clearOfRealExpiry, startTime, timeStep } from '../../support/lua-vs-model.js';
import { memoryFixture, redisFixture, type StoreFixture } from '../../support/store-fixtures.js';
import { useRedisServer } from '../../support/use-redis.js';

/**
 * One engine behind both doors: for the same limit, the same sequence of
 * costs at the same instants gets the same decisions and the same remaining
 * through ShouldRateLimit (hits_addend) as through Allow (cost), on the
 * embedded store and on Redis (virtual time in both).
 */
const LIMITS: [string, string, string][] = [
  ['token bucket', 'algorithm: token_bucket, capacity: 5, refill_per_second: 2', 'limit: { algorithm: token_bucket, capacity: 5, refill_per_second: 2 }'],
  ['fixed window', 'algorithm: fixed_window, limit: 4, window: minute', 'rate_limit: { unit: minute, requests_per_unit: 4 }'],
  ['gcra', 'algorithm: gcra, capacity: 4, refill_per_second: 3', 'limit: { algorithm: gcra, capacity: 4, refill_per_second: 3 }'],
  ['sliding window log', 'algorithm: sliding_window_log, limit: 4, window: second', 'limit: { algorithm: sliding_window_log, limit: 4, window: second }'],
  [
    'sliding window counter',
    'algorithm: sliding_window_counter, limit: 5, window: second',
    'limit: { algorithm: sliding_window_counter, limit: 5, window: 1s }',
  ],
  ['leaky bucket', 'algorithm: leaky_bucket, capacity: 4, leak_per_second: 2', 'limit: { algorithm: leaky_bucket, capacity: 4, leak_per_second: 2 }'],
];

const redis = useRedisServer();

describe.each([
  ['embedded', () => memoryFixture()],
  ['redis', () => redisFixture(redis())],
] as [string, () => StoreFixture][])('ShouldRateLimit decides as Allow on the %s store', (_store, makeFixture) => {
  it.each(LIMITS)('%s', async (_name, policyLimit, rule) => {
    const f = makeFixture();
    const policies = parsePolicies(`policies:\n  p:\n    limits:\n      - { name: l, key_by: user, ${policyLimit} }\n`);
    const config = parseRlsConfig(new Map([['d.yaml', `domain: d\ndescriptors:\n  - key: user\n    ${rule}\n`]]));
    const engine = new QuotaEngine(policies, f.store);
    await fc.assert(
      fc.asyncProperty(startTime, fc.array(fc.tuple(timeStep, fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 25 }), async (start, steps) => {
        await f.reset();
        let now = clearOfRealExpiry(start);
        for (const [i, [step, cost]] of steps.entries()) {
          now = clearOfRealExpiry(now + step);
          f.clock.set(now);
          const allow = await engine.allow({ policy: 'p', identity: { user: 'u' }, cost, requestId: '' });
          const rls = await decideRls(engine, config, { domain: 'd', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }], hits_addend: cost }, 60_000);
          const verdict = rls.verdicts[0]!;
          if (verdict.kind !== 'limited') throw new Error(`step ${i}: no limit matched`);
          expect(
            { allowed: !verdict.over, remaining: verdict.outcome?.remaining, reset: verdict.outcome?.resetAfterMs, retry: verdict.retryAfterMs },
            `step ${i}`,
          ).toEqual({
            allowed: allow.allowed,
            remaining: allow.limits[0]!.remaining,
            reset: allow.limits[0]!.resetAfterMs,
            retry: allow.retryAfterMs,
          });
        }
      }),
      { numRuns: 40 },
    );
    await engine.failure.close();
  });
});
