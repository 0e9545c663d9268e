import { afterAll, describe, expect, it } from 'vitest';
import { closedPort } from '../../support/closed-port.js';
import { jsonLines, quotactl } from '../../support/quotactl.js';
import { writeFixturePolicies } from './fixture-policies.js';
import { useServiceProcess } from './service.js';

// quotactl's commands end to end: the real program against a real service
// process, output parsed (--json) or read as a person would (tables).

const policies = writeFixturePolicies();
afterAll(() => policies.remove());
const service = useServiceProcess(() => ({ QUOTA_POLICIES: policies.path }));
/** quotactl with QUOTACTL_ADDR pointing at the service, as a user would set it once. */
const run = (args: readonly string[], env: Record<string, string> = {}) => quotactl(args, { env: { QUOTACTL_ADDR: service.address(), ...env } });

interface LimitJson {
  name: string;
  algorithm: string;
  limit: number;
  remaining: number;
  resetAfterMs: number;
}

describe('quotactl policies', () => {
  it("--json: every policy the service enforces, with each limit's algorithm and parameters", async () => {
    const { code, stdout, stderr } = await run(['--json', 'policies']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const [doc] = jsonLines<{ policies: { name: string; failureMode: string; localShare?: number; limits: Record<string, unknown>[] }[] }>(stdout);
    expect(doc!.policies.map((p) => p.name).sort()).toEqual(['daily', 'orders', 'scarce', 'team']);
    expect(doc!.policies.find((p) => p.name === 'orders')).toMatchObject({
      failureMode: 'local',
      localShare: 0.5,
      limits: [{ name: 'orders', keyBy: 'user', algorithm: 'token_bucket', capacity: 10, refillPerSecond: 2 }],
    });
    expect(doc!.policies.find((p) => p.name === 'team')!.limits).toEqual([
      { name: 'team-user', keyBy: 'user', algorithm: 'fixed_window', limit: 50, window: 'day', windowMs: 86_400_000 },
      { name: 'team-tenant', keyBy: 'tenant', algorithm: 'sliding_window_counter', limit: 500, window: 'hour', windowMs: 3_600_000 },
    ]);
  });

  it('piped: plain aligned columns, no borders and no colour', async () => {
    const { code, stdout } = await run(['policies']);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]!.split(/\s{2,}/)).toEqual(['POLICY', 'LIMIT', 'KEY_BY', 'ALGORITHM', 'PARAMETERS', 'ON_STORE_FAILURE']);
    expect(lines.find((l) => l.startsWith('scarce'))!.split(/\s{2,}/)).toEqual([
      'scarce',
      'scarce',
      'user',
      'token_bucket',
      'capacity 5, +0.001/s',
      'fail_closed',
    ]);
    expect(stdout).not.toMatch(/[│┌─]|\x1b\[/);
  });

  it('on a terminal: a table with borders, in colour unless NO_COLOR', async () => {
    const env = { QUOTACTL_ADDR: service.address() };
    const coloured = await quotactl(['policies'], { env, tty: true });
    expect(coloured.stdout).toMatch(/┌─/);
    expect(coloured.stdout).toMatch(/\x1b\[1mpolicy\x1b\[22m/);
    const plain = await quotactl(['policies'], { env: { ...env, NO_COLOR: '1' }, tty: true });
    expect(plain.stdout).toMatch(/┌─/);
    expect(plain.stdout).not.toMatch(/\x1b\[/);
    expect((await quotactl(['--no-color', 'policies'], { env, tty: true })).stdout).not.toMatch(/\x1b\[/);
  });
});

describe('quotactl allow', () => {
  it('allowed: exit 0 and the decision as JSON; denied: exit 1, naming the limit and when to retry', async () => {
    const spend = await run(['--json', 'allow', 'scarce', 'user=allow-1', '--cost', '5']);
    expect(spend.code).toBe(0);
    const [allowed] = jsonLines(spend.stdout);
    expect(allowed).toMatchObject({ policy: 'scarce', identity: { user: 'allow-1' }, allowed: true, deniedBy: '', retryAfterMs: 0, source: 'store' });
    expect((allowed!.limits as LimitJson[])[0]).toMatchObject({ name: 'scarce', algorithm: 'token_bucket', limit: 5 });
    expect((allowed!.limits as LimitJson[])[0]!.remaining).toBeLessThan(0.1);

    const deny = await run(['--json', 'allow', 'scarce', 'user=allow-1']);
    expect(deny.code).toBe(1);
    const [denied] = jsonLines(deny.stdout);
    expect(denied).toMatchObject({ allowed: false, deniedBy: 'scarce', source: 'store' });
    expect(denied!.retryAfterMs as number).toBeGreaterThan(100_000);

    const text = await run(['allow', 'scarce', 'user=allow-1']);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^denied scarce user=allow-1 cost 1: by scarce, retry in \d+ min/);
  });

  it('--request-id: a retry gets the first decision and spends nothing more', async () => {
    const args = ['--json', 'allow', 'daily', 'user=allow-2', '--cost', '7', '--request-id', 'order-77'];
    const first = jsonLines<{ limits: LimitJson[] }>((await run(args)).stdout)[0]!;
    const retry = jsonLines<{ limits: LimitJson[] }>((await run(args)).stdout)[0]!;
    expect(first.limits[0]!.remaining).toBe(93);
    expect(retry).toEqual(first);
    const peek = jsonLines<{ limits: LimitJson[] }>((await run(['--json', 'peek', 'daily', 'user=allow-2'])).stdout)[0]!;
    expect(peek.limits[0]!.remaining).toBe(93);
  });

  it('the service refuses: exit 5 with its message naming the field; unreachable: exit 3', async () => {
    const unknown = await run(['allow', 'no-such-policy', 'user=1']);
    expect(unknown).toMatchObject({ code: 5, stdout: '' });
    expect(unknown.stderr).toBe('quotactl: NOT_FOUND: policy: no policy named "no-such-policy"\n');
    const missing = await run(['allow', 'team', 'user=1']);
    expect(missing.code).toBe(5);
    expect(missing.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: identity\.tenant: required by limit "team-tenant"/);
    const negative = await run(['allow', 'daily', 'user=1', '--cost', '-1']);
    expect(negative.code).toBe(5);
    expect(negative.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: --cost \(cost\): must not be negative, got -1/);

    const nobody = await quotactl(['allow', 'daily', 'user=1'], { env: { QUOTACTL_ADDR: `127.0.0.1:${await closedPort()}` } });
    expect(nobody.code).toBe(3);
    expect(nobody.stderr).toMatch(/^quotactl: UNAVAILABLE: /);
  });
});

describe('quotactl peek', () => {
  it("shows every limit's remaining quota and spends nothing", async () => {
    expect((await run(['allow', 'team', 'user=peek-1', 'tenant=peek-t', '--cost', '4'])).code).toBe(0);
    const peeks = await Promise.all([1, 2].map(() => run(['--json', 'peek', 'team', 'user=peek-1', 'tenant=peek-t'])));
    for (const { code } of peeks) expect(code).toBe(0);
    const [first, second] = peeks.map((p) => jsonLines<{ policy: string; limits: LimitJson[] }>(p.stdout)[0]!);
    expect(first!.policy).toBe('team');
    expect(first!.limits.map((l) => [l.name, l.algorithm, l.limit, l.remaining])).toEqual([
      ['team-user', 'fixed_window', 50, 46],
      ['team-tenant', 'sliding_window_counter', 500, 496],
    ]);
    expect(second!.limits.map((l) => l.remaining)).toEqual([46, 496]);

    const table = await run(['peek', 'team', 'user=peek-1', 'tenant=peek-t']);
    expect(table.stdout.split('\n')[0]).toBe('team user=peek-1 tenant=peek-t');
    expect(table.stdout).toMatch(/^team-user\s+fixed_window\s+46\s+50\s/m);
  });

  it('an unknown policy: exit 5', async () => {
    expect(await run(['peek', 'nope', 'user=1'])).toMatchObject({ code: 5, stderr: 'quotactl: NOT_FOUND: policy: no policy named "nope"\n' });
  });
});

describe('quotactl bench', () => {
  it('--json: every call decided, decisions/s and ordered latency percentiles; no user gets more than its bucket allows', async () => {
    const { code, stdout, stderr } = await run(['--json', 'bench', '--policy', 'scarce', '--requests', '60', '--concurrency', '4', '--users', '3']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const [result] = jsonLines<{
      decisions: number;
      allowed: number;
      denied: number;
      errors: Record<string, number>;
      durationMs: number;
      decisionsPerSecond: number;
      latencyMs: { count: number; p50: number; p90: number; p99: number; p999: number; max: number };
    }>(stdout);
    expect(result).toMatchObject({ decisions: 60, errors: {}, latencyMs: { count: 60 } });
    // Three users with 5 tokens each (refill is 1 per 1000 s): exactly 15 allowed.
    expect(result!.allowed).toBe(15);
    expect(result!.denied).toBe(45);
    expect(result!.decisionsPerSecond).toBeCloseTo((60 * 1000) / result!.durationMs, 6);
    const { p50, p90, p99, p999, max } = result!.latencyMs;
    expect(0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max).toBe(true);
    const peek = jsonLines<{ limits: LimitJson[] }>((await run(['--json', 'peek', 'scarce', 'user=quotactl-bench-2'])).stdout)[0]!;
    expect(peek.limits[0]!.remaining).toBeLessThan(0.5);
  });

  it('on a terminal: a progress bar on stderr, then the summary table', async () => {
    const { code, stdout, stderr } = await quotactl(['bench', '--policy', 'daily', '--duration', '300ms', '--users', '2', 'tenant=ignored'], {
      env: { QUOTACTL_ADDR: service.address(), NO_COLOR: '1' },
      tty: true,
    });
    expect(code).toBe(0);
    expect(stderr).toMatch(/bench daily \|[█░]+\| [\d.]+\/0\.3 s \| \d+ decisions\/s/);
    for (const row of ['decisions/s', 'latency p50', 'latency p99', 'latency max']) expect(stdout).toMatch(new RegExp(`│ ${row} +│ +[\\d.]+( ms)? │`));
  });

  it('Ctrl-C ends the run early: the summary of what was done, exit 0', async () => {
    const interrupt = new AbortController();
    const { code, stdout } = await quotactl(['--json', 'bench', '--policy', 'daily', '--duration', '60s', '--concurrency', '2'], {
      env: { QUOTACTL_ADDR: service.address() },
      tty: true,
      interrupt: interrupt.signal,
      // The bar shows a rate once calls were answered.
      onStderr: (stderr) => /\| [1-9]\d* decisions\/s/.test(stderr) && interrupt.abort(),
    });
    expect(code).toBe(0);
    const [result] = jsonLines<{ interrupted: boolean; durationMs: number; decisions: number; errors: object }>(stdout);
    expect(result).toMatchObject({ interrupted: true, errors: {} });
    expect(result!.decisions).toBeGreaterThan(0);
    expect(result!.durationMs).toBeLessThan(60_000);
  });

  it('a service that cannot be reached, or a request it refuses, ends the run before the load: exit 3, 5', async () => {
    const nobody = await quotactl(['bench', '--policy', 'daily', '--duration', '60s'], { env: { QUOTACTL_ADDR: `127.0.0.1:${await closedPort()}` } });
    expect(nobody.code).toBe(3);
    expect(nobody.stderr).toMatch(/^quotactl: UNAVAILABLE: /);
    const missing = await run(['bench', '--policy', 'team', '--duration', '60s']);
    expect(missing.code).toBe(5);
    expect(missing.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: identity\.tenant: required by limit "team-tenant"/);
  });

  it('an unknown policy stops the run: exit 5; no --policy: exit 2', async () => {
    const unknown = await run(['bench', '--policy', 'nope', '--duration', '5s']);
    expect(unknown).toMatchObject({ code: 5, stderr: 'quotactl: NOT_FOUND: policy: no policy named "nope"\n' });
    const missing = await run(['bench']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/required option '--policy <name>' not specified/);
  });
});
