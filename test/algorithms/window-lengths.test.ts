import { beforeEach, describe, expect, it } from 'vitest';
import { identityKey, parsePolicies, stateKeys } from '@quota-service/core';
import { fromProtoParameters } from '../../src/api/limit-parameters.js';
import { validateOverride } from '../../src/overrides/override.js';
import { limitFrom, T0, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { decideLimit } from '../support/store-calls.js';

/**
 * Windows of any length in the policy file (`15m`, `90s`, `1h30m`): a fixed
 * window of a length other than a second, minute, hour or day is aligned to
 * multiples of its length since the Unix epoch, on both stores; a length
 * that is exactly one of those units is that named window, with its key.
 */
const redis = useRedisServer();
const KEY = identityKey('w', 'user', '42');

describe.each(bothStores(redis))('fixed windows written as lengths on the %s store', (_name, makeFixture) => {
  let f: StoreFixture;
  beforeEach(async () => {
    f ??= makeFixture();
    await f.reset();
  });

  it('15m: the window runs on the quarter hour (UTC), its counter in <key>:900000ms', async () => {
    const limit = limitFrom({ name: 'w', key_by: 'user', algorithm: 'fixed_window', limit: 2, window: '15m' });
    // 08:07:30 UTC: in the window 08:00-08:15, which ends in 7.5 minutes.
    f.clock.set(Date.UTC(2026, 10, 21, 8, 7, 30));
    expect(await decideLimit(f.store, limit, KEY, 2)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 0, resetAfterMs: 450_000 });
    expect(await f.keys()).toEqual(['rl:v1:w:user:{42}:900000ms']);
    // 08:14:59: still that window, full.
    f.clock.set(Date.UTC(2026, 10, 21, 8, 14, 59));
    expect(await decideLimit(f.store, limit, KEY, 1)).toEqual({ allowed: false, retryAfterMs: 1_000, remaining: 0, resetAfterMs: 1_000 });
    // 08:15:00: a new window, until 08:30.
    f.clock.set(Date.UTC(2026, 10, 21, 8, 15, 0));
    expect(await decideLimit(f.store, limit, KEY, 1)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 1, resetAfterMs: 900_000 });
    expect(await f.counter('rl:v1:w:user:{42}:900000ms')).toBe(1);
  });

  it('90s: windows start at multiples of 90 s since the epoch, not on the minute', async () => {
    const limit = limitFrom({ name: 'w', key_by: 'user', algorithm: 'fixed_window', limit: 1, window: '90s' });
    // T0 (08:00:00 UTC) is a multiple of 90 s; the windows are 08:00:00-08:01:30, 08:01:30-08:03:00.
    expect(T0 % 90_000).toBe(0);
    f.clock.set(T0 + 60_000);
    expect(await decideLimit(f.store, limit, KEY, 1)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 0, resetAfterMs: 30_000 });
    // 08:01:29: same window, denied until 08:01:30 (a minute window would have restarted at 08:01:00).
    f.clock.set(T0 + 89_000);
    expect(await decideLimit(f.store, limit, KEY, 1)).toEqual({ allowed: false, retryAfterMs: 1_000, remaining: 0, resetAfterMs: 1_000 });
    f.clock.set(T0 + 90_000);
    expect(await decideLimit(f.store, limit, KEY, 1)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 0, resetAfterMs: 90_000 });
    // 08:02:59: the window 08:01:30-08:03:00, full.
    f.clock.set(T0 + 179_000);
    expect(await decideLimit(f.store, limit, KEY, 1)).toMatchObject({ allowed: false, retryAfterMs: 1_000 });
    expect(await f.keys()).toEqual(['rl:v1:w:user:{42}:90000ms']);
  });

  it('1h30m: windows of 5400000 ms since the epoch (16 a day, from midnight UTC)', async () => {
    const limit = limitFrom({ name: 'w', key_by: 'user', algorithm: 'fixed_window', limit: 1, window: '1h30m' });
    expect(limit.params).toEqual({ limit: 1, window: 5_400_000 });
    // 08:00 UTC is 30 minutes into the window 07:30-09:00.
    expect(await decideLimit(f.store, limit, KEY, 1)).toEqual({ allowed: true, retryAfterMs: 0, remaining: 0, resetAfterMs: 3_600_000 });
    f.clock.set(Date.UTC(2026, 10, 21, 9, 0, 0));
    expect((await decideLimit(f.store, limit, KEY, 1)).allowed).toBe(true);
  });

  it('a length of exactly one unit is that named window: 1m and 60s count in the minute window, under its key', async () => {
    const named = limitFrom({ name: 'w', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' });
    for (const window of ['1m', '60s', 'Minute']) {
      const limit = limitFrom({ name: 'w', key_by: 'user', algorithm: 'fixed_window', limit: 3, window });
      expect(limit.params).toEqual(named.params);
      await decideLimit(f.store, limit, KEY, 1);
    }
    expect(await f.keys()).toEqual(['rl:v1:w:user:{42}:minute']);
    expect(await f.counter('rl:v1:w:user:{42}:minute')).toBe(3);
  });
});

describe('a window written as a length, beyond the decision', () => {
  const yaml = `
policies:
  reports:
    limits:
      - { name: reports, key_by: tenant, algorithm: fixed_window, limit: 50, window: 1h30m }
`;
  const policies = parsePolicies(yaml);
  const override = (fields: Record<string, unknown>) =>
    validateOverride(policies, {
      target: { limit: 'reports', match: 'exact', value: 'acme' },
      parameters: { algorithm: 'fixed_window', fields },
      ttlMs: 0,
      reason: 'test',
      setBy: 'test',
    });

  it("a reset removes the counter of the limit's own length, beside the named windows'", () => {
    const key = identityKey('reports', 'tenant', 'acme');
    expect(stateKeys(key, 5_400_000)).toContain('rl:v1:reports:tenant:{acme}:5400000ms');
    expect(stateKeys(key, 'minute')).toEqual(stateKeys(key));
  });

  it('an override may repeat the window in any spelling of its length (or as window_ms), never change it', () => {
    expect(override({ limit: 80, window: '90m' }).parameters).toMatchObject({ limit: 80 });
    expect(() => override({ limit: 80, window: '1h' })).toThrow(/window: cannot differ from the limit's own window/);
    const fromProto = fromProtoParameters({ fixedWindow: { limit: 80, window: '', windowMs: 5_400_000 } });
    expect(fromProto).toEqual({ algorithm: 'fixed_window', fields: { limit: 80, window: '1h30m' } });
    expect(override(fromProto!.fields).parameters).toMatchObject({ limit: 80 });
    const other = fromProtoParameters({ fixedWindow: { limit: 80, window: '', windowMs: 60_000 } });
    expect(() => override(other!.fields)).toThrow(/cannot differ/);
  });
});
