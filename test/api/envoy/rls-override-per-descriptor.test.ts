import { describe, expect, it } from 'vitest';
import { rlsConfigDir, type RlsDescriptor, type RlsResponse } from '../../support/rls-client.js';
import { useRlsService } from '../../support/rls-service.js';
import { useRedisServer } from '../../support/use-redis.js';

/**
 * Several `limit` overrides on descriptors with the same entries, against a
 * real service process on a real Redis, called by a client built from Envoy's
 * protos: each descriptor is checked against its own limit. Overrides of
 * different units count apart; overrides of the same unit share one counter
 * (as envoyproxy/ratelimit keys it: entries and the unit's window), which
 * every one of them must allow. Units of an hour and more, so that no window
 * turns while a test runs.
 */
const config = rlsConfigDir({
  'edge.yaml': 'domain: edge\ndescriptors:\n  - key: api_key\n    rate_limit: { unit: day, requests_per_unit: 50 }\n',
});
const redis = useRedisServer();

const override = (key: string, requests: number, unit: string): RlsDescriptor => ({
  entries: [{ key: 'api_key', value: key }],
  limit: { requests_per_unit: requests, unit },
});
const summary = (response: RlsResponse) =>
  response.statuses.map((s) => [s.code, s.current_limit?.requests_per_unit, s.current_limit?.unit, s.limit_remaining] as const);

describe('limit overrides on one descriptor, on a single Redis', () => {
  const { client } = useRlsService(() => ({ QUOTA_RLS_CONFIG: config, QUOTA_RLS_STORE_TIMEOUT_MS: '2000', QUOTA_REDIS_URL: redis().url }));

  /** The count the service keeps for api_key=`key` under the override window `window` (null: no such key). */
  const count = async (key: string, window: string): Promise<string | null> => {
    const redisClient = redis().client();
    try {
      return await redisClient.hget(`rl:v1:rls:edge:override:fixed_window:{api_key=${key}}:${window}`, 'c');
    } finally {
      redisClient.disconnect();
    }
  };

  it('1 per hour beside 1000 per second: each against its own limit, and the hour has its own counter', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [override('k-split', 1, 'HOUR'), override('k-split', 1000, 'SECOND')] });
    const first = await ask();
    expect(first.overall_code).toBe('OK');
    expect(summary(first)).toEqual([
      ['OK', 1, 'HOUR', 0],
      ['OK', 1000, 'SECOND', 999],
    ]);
    expect(await count('k-split', 'hour')).toBe('1');
    for (let i = 0; i < 3; i++) {
      const next = await ask();
      expect(next.overall_code).toBe('OVER_LIMIT');
      expect(summary(next)[0]).toEqual(['OVER_LIMIT', 1, 'HOUR', 0]);
      // All or nothing: the per-second limit is not charged for a denied request (999, or 1000 once its second turned).
      expect(next.statuses[1]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 1000, unit: 'SECOND' } });
      expect(next.statuses[1]!.limit_remaining).toBeGreaterThanOrEqual(999);
    }
    expect(await count('k-split', 'hour')).toBe('1');
  });

  it('the same two overrides the other way round: the first request passes, the hour denies the next', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [override('k-reversed', 1000, 'SECOND'), override('k-reversed', 1, 'HOUR')] });
    const first = await ask();
    expect(first.overall_code).toBe('OK');
    expect(summary(first)).toEqual([
      ['OK', 1000, 'SECOND', 999],
      ['OK', 1, 'HOUR', 0],
    ]);
    for (let i = 0; i < 3; i++) {
      const next = await ask();
      expect(next.overall_code).toBe('OVER_LIMIT');
      expect(summary(next)[1]).toEqual(['OVER_LIMIT', 1, 'HOUR', 0]);
    }
    expect(await count('k-reversed', 'hour')).toBe('1');
  });

  it('two overrides of the same unit share one counter, which each limit must allow; each status shows its own limit', async () => {
    const ask = () => client.shouldRateLimit({ domain: 'edge', descriptors: [override('k-same', 2, 'HOUR'), override('k-same', 1000, 'HOUR')] });
    // Each descriptor adds its hit to the shared counter: 2 per request.
    const first = await ask();
    expect(first.overall_code).toBe('OK');
    expect(summary(first)).toEqual([
      ['OK', 2, 'HOUR', 0],
      ['OK', 1000, 'HOUR', 998],
    ]);
    const second = await ask();
    expect(second.overall_code).toBe('OVER_LIMIT');
    expect(summary(second)).toEqual([
      ['OVER_LIMIT', 2, 'HOUR', 0],
      ['OK', 1000, 'HOUR', 998],
    ]);
    expect(await count('k-same', 'hour')).toBe('2');
    // The other order: the same counter, the same answer.
    const reversed = await client.shouldRateLimit({ domain: 'edge', descriptors: [override('k-same', 1000, 'HOUR'), override('k-same', 2, 'HOUR')] });
    expect(summary(reversed)).toEqual([
      ['OK', 1000, 'HOUR', 998],
      ['OVER_LIMIT', 2, 'HOUR', 0],
    ]);
  });

  it('1 per hour twice over with 1000 per hour: two hits a request can never fit a limit of 1: OVER_LIMIT, nothing spent, the one left still shown', async () => {
    const response = await client.shouldRateLimit({ domain: 'edge', descriptors: [override('k-never', 1, 'HOUR'), override('k-never', 1000, 'HOUR')] });
    expect(response.overall_code).toBe('OVER_LIMIT');
    expect(summary(response)).toEqual([
      ['OVER_LIMIT', 1, 'HOUR', 1],
      ['OK', 1000, 'HOUR', 1000],
    ]);
    expect(await count('k-never', 'hour')).toBeNull();
    // Alone, the 1 per hour still has its one request.
    const alone = await client.shouldRateLimit({ domain: 'edge', descriptors: [override('k-never', 1, 'HOUR')] });
    expect(summary(alone)).toEqual([['OK', 1, 'HOUR', 0]]);
  });
});
