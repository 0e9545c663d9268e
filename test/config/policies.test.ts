import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadPolicyFile } from '../../src/config/policies.js';
import { toProtoLimit } from '../../src/api/limit-parameters.js';
import { parsePolicies, PolicyFileError } from '@quota-service/core';

describe('shipped config/policies.yaml', () => {
  it('holds the order API policies: orders, user, tenant, ip and orders.create', async () => {
    const policies = await loadPolicyFile('config/policies.yaml');
    const definition = (name: string) => policies.get(name)?.limits[0]?.definition;
    expect(definition('orders')).toMatchObject({ name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 });
    expect(definition('user')).toMatchObject({ key_by: 'user', algorithm: 'fixed_window', limit: 120, window: 'minute' });
    expect(definition('tenant')).toMatchObject({ key_by: 'tenant', algorithm: 'fixed_window', limit: 2000, window: 'minute' });
    expect(definition('ip')).toMatchObject({ key_by: 'ip', algorithm: 'fixed_window', limit: 30, window: 'minute' });
    // The three limits of an order, all-or-nothing, sharing state with the single-limit policies.
    const create = policies.get('orders.create')!.limits.map((limit) => limit.definition);
    expect(create).toEqual([definition('orders'), definition('user'), definition('tenant')]);
  });
});

const bucket = { name: 'orders', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 };
const window = { name: 'per-user', key_by: 'user', algorithm: 'fixed_window', limit: 120, window: 'minute' };
const file = (policies: Record<string, unknown>) => stringify({ policies });
const errorOf = (yaml: string) => {
  try {
    parsePolicies(yaml, 'policies.yaml');
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyFileError);
    return (error as Error).message;
  }
  throw new Error('expected the policies to be rejected');
};

describe('policy file validation: errors name the policy and field', () => {
  it.each([
    ['negative capacity', { orders: { limits: [{ ...bucket, capacity: -1 }] } }, 'policies.orders.limits[0].capacity:'],
    ['zero rate', { orders: { limits: [{ ...bucket, refill_per_second: 0 }] } }, 'policies.orders.limits[0].refill_per_second:'],
    ['capacity as text', { orders: { limits: [{ ...bucket, capacity: 'ten' }] } }, 'policies.orders.limits[0].capacity:'],
    ['misspelt field', { orders: { limits: [{ ...bucket, capacty: 10 }] } }, 'capacty'],
    [
      'unknown algorithm',
      { orders: { limits: [{ ...bucket, algorithm: 'leaky' }] } },
      'policies.orders.limits[0].algorithm: must be one of "token_bucket", "fixed_window"',
    ],
    ['fractional window limit', { user: { limits: [{ ...window, limit: 1.5 }] } }, 'policies.user.limits[0].limit:'],
    ['unknown window', { user: { limits: [{ ...window, window: 'fortnight' }] } }, 'policies.user.limits[0].window:'],
    ['no limits', { user: { limits: [] } }, 'policies.user.limits: a policy needs at least one limit'],
    [
      'seventeen limits',
      { user: { limits: Array.from({ length: 17 }, (_, i) => ({ ...window, name: `w${i}` })) } },
      'policies.user.limits: at most 16 limits per policy',
    ],
    ['key_by with a colon', { user: { limits: [{ ...window, key_by: 'us:er' }] } }, 'policies.user.limits[0].key_by:'],
    ['limit name with a brace', { user: { limits: [{ ...window, name: 'a{b}' }] } }, 'policies.user.limits[0].name:'],
    ['policy name with spaces', { 'my policy': { limits: [window] } }, 'my policy'],
    [
      'idle bucket kept for over a year',
      { orders: { limits: [{ ...bucket, capacity: 1e6, refill_per_second: 1e-6 }] } },
      'policies.orders.limits[0].refill_per_second: capacity / refill_per_second is too large',
    ],
    [
      'sliding log over its cap',
      { t: { limits: [{ ...window, algorithm: 'sliding_window_log', limit: 10_001 }] } },
      'policies.t.limits[0].limit: at most 10000',
    ],
    ['sliding counter, fractional limit', { t: { limits: [{ ...window, algorithm: 'sliding_window_counter', limit: 2.5 }] } }, 'policies.t.limits[0].limit:'],
    [
      'sliding counter, unknown window',
      { t: { limits: [{ ...window, algorithm: 'sliding_window_counter', window: 'fortnight' }] } },
      'policies.t.limits[0].window:',
    ],
    [
      'leaky bucket, unknown mode',
      { t: { limits: [{ name: 'l', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, leak_per_second: 1, mode: 'queue' }] } },
      'policies.t.limits[0].mode:',
    ],
    [
      'leaky bucket, zero leak',
      { t: { limits: [{ name: 'l', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, leak_per_second: 0 }] } },
      'policies.t.limits[0].leak_per_second:',
    ],
    [
      'leaky bucket, token bucket field',
      { t: { limits: [{ name: 'l', key_by: 'user', algorithm: 'leaky_bucket', capacity: 5, refill_per_second: 1 }] } },
      'refill_per_second',
    ],
    ['gcra over its rate cap', { t: { limits: [{ ...bucket, algorithm: 'gcra', refill_per_second: 20_000 }] } }, 'policies.t.limits[0].refill_per_second:'],
    [
      'gcra kept for over a year',
      { t: { limits: [{ ...bucket, algorithm: 'gcra', capacity: 1e6, refill_per_second: 1e-6 }] } },
      'policies.t.limits[0].refill_per_second: capacity / refill_per_second is too large',
    ],
    [
      'unknown failure mode',
      { user: { failure_mode: 'fail_sometimes', limits: [window] } },
      'policies.user.failure_mode: must be one of "fail_open", "fail_closed", "local"',
    ],
    ['local without a share', { user: { failure_mode: 'local', limits: [window] } }, 'policies.user.local_share: required with failure_mode local'],
    ['share above 1', { user: { failure_mode: 'local', local_share: 1.5, limits: [window] } }, 'policies.user.local_share: must be at most 1'],
    [
      'share without local',
      { user: { failure_mode: 'fail_closed', local_share: 0.5, limits: [window] } },
      'policies.user.local_share: only meaningful with failure_mode local',
    ],
    [
      'share granting nothing',
      { user: { failure_mode: 'local', local_share: 0.001, limits: [window] } },
      'policies.user.local_share: 0.001 of limit "per-user" grants 0 units per instance',
    ],
    [
      'one limit name, two definitions',
      { a: { limits: [window] }, b: { limits: [{ ...window, limit: 5 }] } },
      'policies.b.limits[0].name: limit "per-user" is also defined in policy "a" with other settings',
    ],
    [
      'plans without plan_by',
      { orders: { limits: [{ ...bucket, plans: { pro: { capacity: 20 } } }] } },
      'policies.orders.limits[0].plan_by: plan_by and plans go together',
    ],
    ['plan_by without plans', { orders: { limits: [{ ...bucket, plan_by: 'plan' }] } }, 'policies.orders.limits[0].plans: plan_by and plans go together'],
    [
      'plan_by equal to key_by',
      { orders: { limits: [{ ...bucket, plan_by: 'user', plans: { pro: {} } }] } },
      'policies.orders.limits[0].plan_by: must be another',
    ],
    [
      'a plan with a field of another algorithm',
      { orders: { limits: [{ ...bucket, plan_by: 'plan', plans: { pro: { limit: 20 } } }] } },
      'policies.orders.limits[0].plans.pro: Unrecognized key: "limit"',
    ],
    [
      'a plan with a bad value',
      { orders: { limits: [{ ...bucket, plan_by: 'plan', plans: { pro: { capacity: -5 } } }] } },
      'policies.orders.limits[0].plans.pro.capacity:',
    ],
    [
      'a plan whose merged parameters fail a check across fields',
      { orders: { limits: [{ ...bucket, plan_by: 'plan', plans: { slow: { refill_per_second: 1e-9 } } }] } },
      'policies.orders.limits[0].plans.slow.refill_per_second: capacity / refill_per_second is too large',
    ],
    [
      'a plan with another window',
      { user: { limits: [{ ...window, plan_by: 'plan', plans: { pro: { window: 'hour' } } }] } },
      "policies.user.limits[0].plans.pro.window: cannot differ from the limit's own window",
    ],
    [
      'a plan name with a space',
      { orders: { limits: [{ ...bucket, plan_by: 'plan', plans: { 'pro plan': {} } }] } },
      'policies.orders.limits[0].plans.pro plan: Invalid key in record',
    ],
    [
      'a local share that leaves a plan nothing',
      { user: { failure_mode: 'local', local_share: 0.1, limits: [{ ...window, plan_by: 'plan', plans: { tiny: { limit: 5 } } }] } },
      'policies.user.local_share: 0.1 of limit "per-user" under plan "tiny" grants 0 units per instance',
    ],
  ])('%s', (_name, policies, expected) => {
    expect(errorOf(file(policies))).toContain(expected);
  });

  it("plans: each plan is the limit with the plan's parameters merged onto its own", () => {
    const policies = parsePolicies(
      file({
        t: {
          limits: [
            {
              name: 'l',
              key_by: 'user',
              algorithm: 'leaky_bucket',
              capacity: 5,
              leak_per_second: 1,
              mode: 'shaping',
              plan_by: 'plan',
              plans: { pro: { capacity: 50 } },
            },
          ],
        },
      }),
    );
    const limit = policies.get('t')!.limits[0]!;
    expect(limit.planBy).toBe('plan');
    expect(limit.plans!.get('pro')).toMatchObject({ name: 'l', keyBy: 'user', params: { capacity: 50, leakPerSecond: 1, mode: 'shaping' }, plan: 'pro' });
  });

  it('one limit shared by two policies with the same settings is allowed (they share state)', () => {
    const policies = parsePolicies(file({ a: { limits: [window] }, b: { limits: [{ ...window, description: 'same limit' }] } }));
    expect([...policies.keys()]).toEqual(['a', 'b']);
  });

  it('failure modes: fail_open by default, local scales each limit by its share', () => {
    const policies = parsePolicies(file({ a: { limits: [window] }, b: { failure_mode: 'local', local_share: 0.25, limits: [bucket] } }));
    expect(policies.get('a')!.failure).toEqual({ mode: 'fail_open', localShare: 1 });
    const b = policies.get('b')!;
    expect(b.failure).toEqual({ mode: 'local', localShare: 0.25 });
    const limit = b.limits[0]!;
    expect(limit.algorithm.scaleParams(limit.params, 0.25)).toEqual({ capacity: 2.5, refillPerSecond: 0.5 });
    const perUser = policies.get('a')!.limits[0]!;
    expect(perUser.algorithm.scaleParams(perUser.params, 0.25)).toEqual({ limit: 30, window: 'minute' });
  });

  it('YAML syntax errors say so, with the file name', () => {
    expect(errorOf('policies:\n  orders: [\n')).toMatch(/^policies\.yaml: invalid YAML:/);
  });

  it('a missing file is named', async () => {
    await expect(loadPolicyFile('/nonexistent/policies.yaml')).rejects.toThrow(/cannot read policy file \/nonexistent\/policies\.yaml/);
  });
});

describe('windows of any length', () => {
  const yaml = `
policies:
  reports:
    limits:
      - name: reports
        key_by: tenant
        algorithm: fixed_window
        limit: 50
        window: 1h30m
        plan_by: plan
        plans:
          pro: { limit: 500, window: 90m }
`;

  it('a policy file with window: 1h30m loads, and ListPolicies reports the window as written and in ms', () => {
    const limit = parsePolicies(yaml).get('reports')!.limits[0]!;
    expect(limit.definition).toMatchObject({ window: '1h30m' });
    expect(limit.params).toEqual({ limit: 50, window: 5_400_000 });
    // A plan may name the same length another way; it counts in the limit's own window.
    expect(limit.plans?.get('pro')?.params).toEqual({ limit: 500, window: 5_400_000 });
    expect(toProtoLimit(limit)).toMatchObject({ name: 'reports', fixedWindow: { limit: 50, window: '1h30m', windowMs: 5_400_000 } });
    expect(toProtoLimit(limit).plans[0]?.parameters).toEqual({ fixedWindow: { limit: 500, window: '1h30m', windowMs: 5_400_000 } });
  });

  it.each([
    ['fixed_window', '15m', 900_000, '15m'],
    ['sliding_window_log', '90s', 90_000, '1m30s'],
    ['sliding_window_counter', '2h', 7_200_000, '2h'],
    ['fixed_window', ' 1H ', 'hour', 'hour'],
    ['sliding_window_counter', '60s', 'minute', 'minute'],
    ['fixed_window', 'week', 604_800_000, '7d'],
  ])('%s with window %j: %j, reported as %j', (algorithm, given, params, reported) => {
    const limit = parsePolicies(file({ t: { limits: [{ ...window, algorithm, limit: 10, window: given }] } })).get('t')!.limits[0]!;
    expect(limit.params).toEqual({ limit: 10, window: params });
    expect(Object.values(toProtoLimit(limit)).find((v) => typeof v === 'object' && v !== null && 'window' in v)).toMatchObject({ window: reported });
  });

  it.each([['0s'], ['15x'], ['m15'], ['30m1h'], ['1.5ms'], ['367d'], ['15 m'], [900_000]])('window %j is refused, naming the field and the forms', (given) => {
    expect(errorOf(file({ t: { limits: [{ ...window, window: given }] } }))).toMatch(
      /policies\.t\.limits\[0\]\.window: must be a unit \(second, minute, hour, day, week, month, year\) or a whole number of ms .* such as 90s, 15m, 1h30m/,
    );
  });

  it("a plan cannot change the window's length", () => {
    const message = errorOf(file({ t: { limits: [{ ...window, window: '15m', plan_by: 'plan', plans: { pro: { window: '10m' } } }] } }));
    expect(message).toContain("policies.t.limits[0].plans.pro.window: cannot differ from the limit's own window");
  });
});
