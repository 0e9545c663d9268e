import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies, PolicyFileError } from '@quota-service/core';
import { toProtoLimit } from '../../src/api/limit-parameters.js';

const slices = { share: 0.05, max_units: 50, ttl_ms: 250 };
const limits = {
  token_bucket: { name: 'tenant-budget', key_by: 'tenant', algorithm: 'token_bucket', capacity: 2000, refill_per_second: 100 },
  gcra: { name: 'tenant-pace', key_by: 'tenant', algorithm: 'gcra', capacity: 100, refill_per_second: 50 },
  fixed_window: { name: 'tenant-minute', key_by: 'tenant', algorithm: 'fixed_window', limit: 2000, window: 'minute' },
  sliding_window_log: { name: 'tenant-log', key_by: 'tenant', algorithm: 'sliding_window_log', limit: 100, window: 'minute' },
  sliding_window_counter: { name: 'tenant-counter', key_by: 'tenant', algorithm: 'sliding_window_counter', limit: 100, window: 'minute' },
  leaky_bucket: { name: 'tenant-leak', key_by: 'tenant', algorithm: 'leaky_bucket', capacity: 100, leak_per_second: 10 },
  concurrency: { name: 'tenant-jobs', key_by: 'tenant', algorithm: 'concurrency', limit: 5, lease_ttl_ms: 30000 },
} as const;
const file = (limit: Record<string, unknown>) => stringify({ policies: { hot: { limits: [limit] } } });
const errorOf = (yaml: string): string => {
  try {
    parsePolicies(yaml, 'policies.yaml');
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyFileError);
    return (error as Error).message;
  }
  throw new Error('expected the policies to be refused');
};

describe("a limit's slices option", () => {
  it('is off by default: a limit without the key has no slices', () => {
    const limit = parsePolicies(file(limits.token_bucket)).get('hot')!.limits[0]!;
    expect(limit.slices).toBeUndefined();
    expect(toProtoLimit(limit).slices).toBeUndefined();
  });

  it.each(['token_bucket', 'gcra', 'fixed_window'] as const)('loads on %s, and ListPolicies reports it', (algorithm) => {
    const limit = parsePolicies(file({ ...limits[algorithm], slices })).get('hot')!.limits[0]!;
    expect(limit.slices).toEqual({ share: 0.05, maxUnits: 50, ttlMs: 250 });
    expect(toProtoLimit(limit).slices).toEqual({ share: 0.05, maxUnits: 50, ttlMs: 250 });
  });

  it('carries over to the limit under each of its plans', () => {
    const limit = parsePolicies(file({ ...limits.token_bucket, slices, plan_by: 'plan', plans: { pro: { capacity: 5000 } } })).get('hot')!.limits[0]!;
    expect(limit.plans?.get('pro')?.slices).toEqual({ share: 0.05, maxUnits: 50, ttlMs: 250 });
  });

  it.each(['sliding_window_log', 'sliding_window_counter', 'leaky_bucket', 'concurrency'] as const)(
    'is refused on %s, naming the limit and the key',
    (algorithm) => {
      const message = errorOf(file({ ...limits[algorithm], slices }));
      expect(message).toContain('policies.hot.limits[0].slices:');
      expect(message).toContain(`limit "${limits[algorithm].name}" uses ${algorithm}`);
      expect(message).toContain('token_bucket, gcra, fixed_window');
    },
  );

  it.each([
    ['share 0', { ...slices, share: 0 }, 'slices.share: must be above 0'],
    ['share above 1', { ...slices, share: 1.5 }, 'slices.share: must be at most 1'],
    ['negative share', { ...slices, share: -0.1 }, 'slices.share: must be above 0'],
    ['max_units 0', { ...slices, max_units: 0 }, 'slices.max_units: must be at least 1'],
    ['fractional max_units', { ...slices, max_units: 2.5 }, 'slices.max_units: must be a whole number'],
    ['ttl_ms 0', { ...slices, ttl_ms: 0 }, 'slices.ttl_ms: must be at least 1 ms'],
    ['ttl_ms as text', { ...slices, ttl_ms: '250' }, 'slices.ttl_ms: must be a whole number of ms'],
    ['missing ttl_ms', { share: 0.05, max_units: 50 }, 'slices.ttl_ms:'],
    ['a misspelt field', { ...slices, maxunits: 5 }, 'slices: Unrecognized key: "maxunits"'],
  ])('refuses %s, naming the field', (_, given, expected) => {
    expect(errorOf(file({ ...limits.token_bucket, slices: given }))).toContain(`policies.hot.limits[0].${expected}`);
  });

  it('accepts share 1 and ttl_ms 1, the edges of the allowed ranges', () => {
    const limit = parsePolicies(file({ ...limits.gcra, slices: { share: 1, max_units: 1, ttl_ms: 1 } })).get('hot')!.limits[0]!;
    expect(limit.slices).toEqual({ share: 1, maxUnits: 1, ttlMs: 1 });
  });
});
