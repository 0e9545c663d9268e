import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jsonLines } from '../../support/quotactl.js';
import { valueDigest } from '../../../src/api/admin/audit.js';
import { ADMIN_TOKEN, DAILY_ADMIN_TOKEN, type LimitJson, type OverrideJson, quotactlAs, VIEWER_TOKEN, writeAdminFixture } from './admin-fixture.js';
import { useServiceProcess } from './service.js';

// quotactl's admin commands (reset, overrides) end to end: the real program
// against a real service process with caller authentication on, as the
// support desk's admin token and as a token without the admin role.

const fixture = writeAdminFixture();
const brokenPolicies = join(fixture.dir, 'broken.yaml');
writeFileSync(
  brokenPolicies,
  'policies:\n  orders:\n    limits:\n      - name: orders\n        key_by: user\n        algorithm: token_bucket\n        capacity: -3\n',
);
afterAll(() => fixture.remove());
const service = useServiceProcess(() => fixture.env);

const { as, admin, outputs } = quotactlAs(() => service.address());

/** The identity's limits as peek reports them (--json). */
async function peek(policy: string, ...identity: string[]): Promise<LimitJson[]> {
  const { code, stdout, stderr } = await admin(['--json', 'peek', policy, ...identity]);
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  return jsonLines<{ limits: LimitJson[] }>(stdout)[0]!.limits;
}

describe('quotactl policies', () => {
  it("a limit's plans: --json lists them with their parameters; piped, a row per plan under the default", async () => {
    const json = await admin(['--json', 'policies']);
    expect(json.code).toBe(0);
    const api = jsonLines<{ policies: { name: string; limits: object[] }[] }>(json.stdout)[0]!.policies.find((p) => p.name === 'api')!;
    expect(api.limits).toEqual([
      {
        name: 'api',
        keyBy: 'customer',
        algorithm: 'token_bucket',
        capacity: 5,
        refillPerSecond: 0.001,
        planBy: 'plan',
        plans: [{ name: 'pro', capacity: 20, refillPerSecond: 0.001 }],
      },
    ]);
    const lines = (await admin(['policies'])).stdout.split('\n');
    const at = lines.findIndex((l) => l.startsWith('api '));
    expect(lines[at]!.split(/\s{2,}/)).toEqual(['api', 'api', 'customer', 'token_bucket', 'capacity 5, +0.001/s (default)', 'fail_open']);
    expect(lines[at + 1]!.trim().split(/\s{2,}/)).toEqual(['plan=pro', 'capacity 20, +0.001/s']);
  });
});

describe('quotactl reset', () => {
  it("--json: the limits before and after; the identity's next decision starts full", async () => {
    expect((await admin(['allow', 'api', 'customer=r-1', '--cost', '5'])).code).toBe(0);
    expect((await admin(['allow', 'api', 'customer=r-1'])).code).toBe(1);

    const { code, stdout, stderr } = await admin(['--json', 'reset', 'api', 'customer=r-1']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const [reset] = jsonLines<{ policy: string; identity: object; before: LimitJson[]; after: LimitJson[] }>(stdout);
    expect(reset).toMatchObject({ policy: 'api', identity: { customer: 'r-1' }, after: [{ name: 'api', limit: 5, remaining: 5, applied: 'default' }] });
    expect(reset!.before).toHaveLength(1);
    expect(reset!.before[0]!.remaining).toBeLessThan(1);
    expect((await peek('api', 'customer=r-1'))[0]!.remaining).toBe(5);
    expect((await admin(['allow', 'api', 'customer=r-1', '--cost', '5'])).code).toBe(0);
  });

  it('--limit resets only the limits named; piped, a plain table of before and now', async () => {
    expect((await admin(['allow', 'team', 'user=r-2', 'tenant=r-t', '--cost', '30'])).code).toBe(0);
    const { code, stdout } = await admin(['reset', 'team', 'user=r-2', 'tenant=r-t', '--limit', 'team-user']);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('reset team user=r-2 tenant=r-t');
    expect(lines[1]!.split(/\s{2,}/)).toEqual(['LIMIT', 'ALGORITHM', 'REMAINING_BEFORE', 'NOW', 'OF']);
    expect(lines[2]!.split(/\s{2,}/)).toEqual(['team-user', 'fixed_window', '20', '50', '50']);
    expect(lines).toHaveLength(3);
    expect((await peek('team', 'user=r-2', 'tenant=r-t')).map((l) => [l.name, l.remaining])).toEqual([
      ['team-user', 50],
      ['team-tenant', 470],
    ]);
  });

  it('an unknown policy or limit, a missing identity part: exit 5 with the field named, nothing reset', async () => {
    expect(await admin(['reset', 'nope', 'user=1'])).toMatchObject({ code: 5, stderr: 'quotactl: NOT_FOUND: policy: no policy named "nope"\n', stdout: '' });
    expect((await admin(['allow', 'team', 'user=r-3', 'tenant=r-t3', '--cost', '10'])).code).toBe(0);
    const limit = await admin(['reset', 'team', 'user=r-3', 'tenant=r-t3', '--limit', 'team-user', 'no-such-limit']);
    expect(limit.code).toBe(5);
    expect(limit.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: limits\[1\]: policy "team" has no limit "no-such-limit"/);
    const part = await admin(['reset', 'team', 'user=r-3']);
    expect(part.code).toBe(5);
    expect(part.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: identity\.tenant: required by limit "team-tenant"/);
    expect((await peek('team', 'user=r-3', 'tenant=r-t3')).map((l) => l.remaining)).toEqual([40, 490]);
  });
});

describe('quotactl overrides', () => {
  it('set --ttl 2h: stored with the default parameters it left out, applied at once; get shows it', async () => {
    expect((await peek('api', 'customer=o-1'))[0]).toMatchObject({ limit: 5, applied: 'default' });
    const before = Date.now();
    const set = await admin(['--json', 'overrides', 'set', 'api', 'o-1', '--capacity', '50', '--ttl', '2h', '--reason', 'ticket 4711']);
    const after = Date.now();
    expect(set.stderr).toBe('');
    expect(set.code).toBe(0);
    const [{ override, previous }] = jsonLines<{ override: OverrideJson; previous: OverrideJson | null }>(set.stdout) as [
      { override: OverrideJson; previous: null },
    ];
    expect(previous).toBeNull();
    expect(override).toMatchObject({
      limit: 'api',
      match: 'exact',
      value: 'o-1',
      keyBy: 'customer',
      algorithm: 'token_bucket',
      parameters: { capacity: 50, refillPerSecond: 0.001 },
      reason: 'ticket 4711',
      setBy: 'support',
    });
    // The store's clock (Redis's, here the embedded store's) is this machine's: a second of slack either way.
    expect(override.expiresAtMs).toBeGreaterThanOrEqual(before + 7_200_000 - 1_000);
    expect(override.expiresAtMs).toBeLessThanOrEqual(after + 7_200_000 + 1_000);
    expect(override.expiresAtMs - override.setAtMs).toBe(7_200_000);

    expect((await peek('api', 'customer=o-1'))[0]).toMatchObject({ limit: 50, applied: 'exact_override' });
    // Only that customer: a neighbour, and a pro customer, keep their parameters.
    expect((await peek('api', 'customer=o-10'))[0]).toMatchObject({ limit: 5, applied: 'default' });
    expect((await peek('api', 'customer=o-2', 'plan=pro'))[0]).toMatchObject({ limit: 20, applied: 'plan', plan: 'pro' });

    const get = await admin(['--json', 'overrides', 'get', 'api', 'o-1']);
    expect(get.code).toBe(0);
    expect(jsonLines<{ override: OverrideJson }>(get.stdout)[0]!.override).toEqual(override);
    const text = await admin(['overrides', 'get', 'api', 'o-1']);
    expect(text.stdout).toMatch(
      /^api for customer = o-1: capacity 50, \+0\.001\/s\n {2}expires in 2h \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\n {2}set by support at .+: ticket 4711\n$/,
    );
  });

  it('set again replaces it and answers the previous one; an exact override beats a plan', async () => {
    expect((await admin(['overrides', 'set', 'api', 'o-3', '--capacity', '30'])).code).toBe(0);
    const again = await admin(['--json', 'overrides', 'set', 'api', 'o-3', '--capacity', '40', '--refill-per-second', '2']);
    expect(again.code).toBe(0);
    const [doc] = jsonLines<{ override: OverrideJson; previous: OverrideJson }>(again.stdout);
    expect(doc!.override).toMatchObject({ parameters: { capacity: 40, refillPerSecond: 2 }, expiresAtMs: 0, reason: '' });
    expect(doc!.previous).toMatchObject({ value: 'o-3', parameters: { capacity: 30, refillPerSecond: 0.001 } });
    expect((await peek('api', 'customer=o-3', 'plan=pro'))[0]).toMatchObject({ limit: 40, applied: 'exact_override' });
  });

  it('a wildcard (value*) applies to every value with the prefix, an exact override still wins', async () => {
    const set = await admin(['--json', 'overrides', 'set', 'daily', 'acme-*', '--limit', '1000']);
    expect(set.code).toBe(0);
    expect(jsonLines<{ override: OverrideJson }>(set.stdout)[0]!.override).toMatchObject({
      limit: 'daily',
      match: 'prefix',
      value: 'acme-',
      algorithm: 'fixed_window',
      parameters: { limit: 1000, window: 'day' },
    });
    expect(await peek('daily', 'user=acme-7')).toMatchObject([{ limit: 1000, applied: 'wildcard_override' }]);
    expect(await peek('daily', 'user=acm')).toMatchObject([{ limit: 100, applied: 'default' }]);
    expect((await admin(['overrides', 'set', 'daily', 'acme-vip', '--limit', '5000'])).code).toBe(0);
    expect(await peek('daily', 'user=acme-vip')).toMatchObject([{ limit: 5000, applied: 'exact_override' }]);
    // --exact: a trailing "*" is part of the value.
    const literal = await admin(['--json', 'overrides', 'set', 'daily', 'star*', '--exact', '--limit', '7']);
    expect(jsonLines<{ override: OverrideJson }>(literal.stdout)[0]!.override).toMatchObject({ match: 'exact', value: 'star*' });
    expect(await peek('daily', 'user=star*')).toMatchObject([{ limit: 7, applied: 'exact_override' }]);
    expect(await peek('daily', 'user=star-1')).toMatchObject([{ limit: 100, applied: 'default' }]);
  });

  it('list: every override in force, sorted; --limit filters; piped plain, a table on a terminal', async () => {
    const all = await admin(['--json', 'overrides', 'list']);
    expect(all.code).toBe(0);
    const listed = jsonLines<{ overrides: OverrideJson[] }>(all.stdout)[0]!.overrides;
    const keys = listed.map((o) => [o.limit, o.match, o.value].join(' '));
    // Sorted by limit, then exact before prefix, then value.
    const order = (o: OverrideJson) => [o.limit, o.match === 'exact' ? 0 : 1, o.value] as const;
    const sorted = [...listed].sort((a, b) => {
      const [x, y] = [order(a), order(b)];
      return x[0] !== y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] !== y[1] ? x[1] - y[1] : x[2] < y[2] ? -1 : x[2] > y[2] ? 1 : 0;
    });
    expect(listed).toEqual(sorted);
    expect(keys).toEqual(expect.arrayContaining(['api exact o-1', 'api exact o-3', 'daily exact acme-vip', 'daily prefix acme-', 'daily exact star*']));
    const daily = jsonLines<{ overrides: OverrideJson[] }>((await admin(['--json', 'overrides', 'list', '--limit', 'daily'])).stdout)[0]!.overrides;
    expect(daily.length).toBeGreaterThanOrEqual(2);
    expect(daily.every((o) => o.limit === 'daily')).toBe(true);
    expect(daily.findIndex((o) => o.match === 'exact')).toBeLessThan(daily.findIndex((o) => o.match === 'prefix'));

    const plain = await admin(['overrides', 'list', '--limit', 'api']);
    const lines = plain.stdout.trimEnd().split('\n');
    expect(lines[0]!.split(/\s{2,}/)).toEqual(['LIMIT', 'KEY_BY', 'VALUE', 'PARAMETERS', 'EXPIRES', 'SET_BY', 'REASON']);
    expect(lines.find((l) => l.includes(' o-1 '))!.split(/\s{2,}/)).toEqual([
      'api',
      'customer',
      'o-1',
      'capacity 50, +0.001/s',
      expect.stringMatching(/^in 2h \(/),
      'support',
      'ticket 4711',
    ]);
    const boxed = await admin(['overrides', 'list', '--limit', 'daily'], { tty: true });
    expect(boxed.stdout).toMatch(/┌─/);
    expect(boxed.stdout).toMatch(/│ acme-\* +│/);
  });

  it('delete: the limit goes back to its default at once; get and delete of what is not there: exit 1', async () => {
    expect((await admin(['overrides', 'set', 'api', 'o-4', '--capacity', '9'])).code).toBe(0);
    expect((await peek('api', 'customer=o-4'))[0]).toMatchObject({ limit: 9, applied: 'exact_override' });
    const removed = await admin(['--json', 'overrides', 'delete', 'api', 'o-4']);
    expect(removed.code).toBe(0);
    expect(jsonLines<{ deleted: OverrideJson }>(removed.stdout)[0]!.deleted).toMatchObject({ value: 'o-4', parameters: { capacity: 9 } });
    expect((await peek('api', 'customer=o-4'))[0]).toMatchObject({ limit: 5, applied: 'default' });
    const again = await admin(['overrides', 'delete', 'api', 'o-4']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^quotactl: NOT_FOUND: /);
    expect(await admin(['overrides', 'get', 'api', 'o-4'])).toMatchObject({ code: 1, stdout: '' });
    // A prefix is another override than the exact value.
    expect((await admin(['overrides', 'get', 'daily', 'acme-vip*'])).code).toBe(1);
  });

  it("parameters the limit's algorithm does not take, or the service refuses: exit 2 or 5 naming them, nothing stored", async () => {
    const foreign = await admin(['overrides', 'set', 'api', 'o-5', '--limit', '10']);
    expect(foreign).toMatchObject({
      code: 2,
      stderr: 'quotactl: --limit: limit "api" is a token_bucket, whose parameters are --capacity, --refill-per-second\n',
    });
    const none = await admin(['overrides', 'set', 'daily', 'o-5']);
    expect(none).toMatchObject({ code: 2, stderr: 'quotactl: give the new parameters of limit "daily" (fixed_window): --limit\n' });
    const unknown = await admin(['overrides', 'set', 'nope', 'o-5', '--capacity', '3']);
    expect(unknown.code).toBe(5);
    expect(unknown.stderr).toMatch(/^quotactl: LIMIT: no policy the service lists to this token has a limit named "nope"/);
    const huge = await admin(['overrides', 'set', 'api', 'o-5', '--capacity', '1e13']);
    expect(huge.code).toBe(5);
    expect(huge.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: --capacity \(parameters\.token_bucket\.capacity\): /);
    const wrong = await admin(['overrides', 'set', 'api', 'o-5', '--algorithm', 'gcra', '--capacity', '3']);
    expect(wrong.code).toBe(5);
    expect(wrong.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: parameters: limit "api" is a token_bucket/);
    const ttl = await admin(['overrides', 'set', 'api', 'o-5', '--capacity', '3', '--ttl', '400d']);
    expect(ttl.code).toBe(5);
    expect(ttl.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: --ttl \(ttl_ms\): must be a duration from 0 \(never expires\) to 366d, got 400d/);
    expect((await admin(['overrides', 'get', 'api', 'o-5'])).code).toBe(1);
    expect((await peek('api', 'customer=o-5'))[0]).toMatchObject({ limit: 5, applied: 'default' });
  });
});

describe('quotactl validate --remote', () => {
  it('the service checks the file: the same verdict and messages as offline', async () => {
    const good = await admin(['validate', '--remote', 'config/policies.yaml']);
    expect(good).toEqual({
      code: 0,
      stdout: 'valid config/policies.yaml: 7 policies (orders, orders.create, orders.in-flight.user, orders.in-flight, user, tenant, ip)\n',
      stderr: '',
    });
    const offline = await admin(['--json', 'validate', brokenPolicies]);
    const remote = await admin(['--json', 'validate', brokenPolicies, '--remote']);
    expect(remote.code).toBe(1);
    expect(remote.stdout).toBe(offline.stdout);
    expect(jsonLines<{ error: string }>(remote.stdout)[0]!.error).toMatch(/policies\.orders\.limits\[0\]\.capacity: /);
    const text = await admin(['validate', '--remote', brokenPolicies]);
    expect(text).toMatchObject({ code: 1, stdout: '' });
    expect(text.stderr).toBe(`${jsonLines<{ error: string }>(offline.stdout)[0]!.error}\n`);
  });
});

describe('quotactl overrides as an admin of some policies', () => {
  it("a limit another policy shares: listed with the value's digest, never changed (exit 4, the hint names the caller's policies)", async () => {
    expect((await admin(['overrides', 'set', 'daily', 'team-7', '--limit', '300'])).code).toBe(0);
    const json = await as(DAILY_ADMIN_TOKEN, ['--json', 'overrides', 'list', '--limit', 'daily']);
    expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 0, stderr: '' });
    const listed = jsonLines<{ overrides: (OverrideJson & { valueSha256?: string })[] }>(json.stdout)[0]!.overrides;
    expect(listed.find((o) => o.valueSha256 === valueDigest('team-7'))).toMatchObject({
      limit: 'daily',
      match: 'exact',
      value: '',
      parameters: { limit: 300 },
    });
    expect(listed.every((o) => o.value === '' && /^[0-9a-f]{16}$/.test(o.valueSha256 ?? ''))).toBe(true);
    const plain = await as(DAILY_ADMIN_TOKEN, ['overrides', 'list', '--limit', 'daily']);
    const row = plain.stdout.split('\n').find((l) => l.includes(valueDigest('team-7')))!;
    expect(row.split(/\s{2,}/).slice(0, 4)).toEqual(['daily', 'user', `sha256:${valueDigest('team-7')}`, '300 per day']);
    expect(plain.stdout).not.toContain('team-7');

    for (const args of [
      ['overrides', 'set', 'daily', 'team-7', '--limit', '100000'],
      ['overrides', 'get', 'daily', 'team-7'],
      ['overrides', 'delete', 'daily', 'team-7'],
      ['overrides', 'list', '--limit', 'api'],
    ]) {
      const { code, stdout, stderr } = await as(DAILY_ADMIN_TOKEN, args);
      expect({ args, code, stdout }).toEqual({ args, code: 4, stdout: '' });
      expect(stderr).toMatch(
        /^quotactl: PERMISSION_DENIED: the token's caller may not act on that policy or limit \(its policies in the service's callers file\); the service said: caller "daily-desk" may not .*\n$/,
      );
    }
    const [status] = await peek('daily', 'user=team-7');
    expect(status).toMatchObject({ limit: 300, applied: 'exact_override' });
  });
});

describe('quotactl admin commands without the admin role', () => {
  it('every one is refused with exit 4, saying the token lacks the admin role; nothing changes', async () => {
    expect((await admin(['overrides', 'set', 'api', 'd-1', '--capacity', '11'])).code).toBe(0);
    for (const args of [
      ['reset', 'api', 'customer=d-1'],
      ['overrides', 'list'],
      ['overrides', 'get', 'api', 'd-1'],
      ['overrides', 'set', 'api', 'd-1', '--capacity', '99'],
      ['overrides', 'delete', 'api', 'd-1'],
      ['validate', '--remote', 'config/policies.yaml'],
    ]) {
      const { code, stdout, stderr } = await as(VIEWER_TOKEN, args);
      expect({ args, code, stdout }).toEqual({ args, code: 4, stdout: '' });
      expect(stderr).toMatch(
        /^quotactl: PERMISSION_DENIED: the token lacks the admin role \(roles: \[admin\] in the service's callers file\); the service said: .*"dashboard".*\n$/,
      );
      const anonymous = await as(undefined, args);
      expect({ args, code: anonymous.code }).toEqual({ args, code: 4 });
      expect(anonymous.stderr).toMatch(/^quotactl: UNAUTHENTICATED: missing bearer token/);
    }
    // The same token may still ask for decisions, and the override stands as it was.
    expect((await as(VIEWER_TOKEN, ['allow', 'api', 'customer=d-1'])).code).toBe(0);
    const [status] = await peek('api', 'customer=d-1');
    expect(status).toMatchObject({ limit: 11, applied: 'exact_override' });
    expect(Math.floor(status!.remaining)).toBe(10);
  });

  it('no run printed a token', () => {
    expect(outputs.length).toBeGreaterThan(40);
    for (const { stdout, stderr } of outputs) {
      for (const token of [ADMIN_TOKEN, VIEWER_TOKEN, DAILY_ADMIN_TOKEN]) {
        expect(stdout).not.toContain(token);
        expect(stderr).not.toContain(token);
      }
    }
  });
});
