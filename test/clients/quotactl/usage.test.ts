import { describe, expect, it } from 'vitest';
import { quotactl, spawnQuotactl } from '../../support/quotactl.js';

// Bad usage is exit status 2 with a message naming what is wrong, before any
// call is made (no service runs here: a call would fail with status 3).

const COMMANDS = ['policies', 'allow', 'peek', 'reset', 'overrides', 'validate', 'watch', 'bench'] as const;
const OVERRIDES = ['list', 'get', 'set', 'delete'] as const;

describe('quotactl usage', () => {
  it('--help on the program and on every command: exit 0, usage on stdout', async () => {
    const top = await quotactl(['--help']);
    expect(top).toMatchObject({ code: 0, stderr: '' });
    for (const command of COMMANDS) expect(top.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(top.stdout).toMatch(/QUOTACTL_ADDR/);
    expect(top.stdout).toMatch(/^ {2}3 {2}the service could not be reached/m);
    for (const command of COMMANDS) {
      const { code, stdout, stderr } = await quotactl([command, '--help']);
      expect({ command, code, stderr }).toEqual({ command, code: 0, stderr: '' });
      expect(stdout).toMatch(new RegExp(`^Usage: quotactl ${command} `));
    }
    for (const sub of OVERRIDES) {
      const { code, stdout, stderr } = await quotactl(['overrides', sub, '--help']);
      expect({ sub, code, stderr }).toEqual({ sub, code: 0, stderr: '' });
      expect(stdout).toMatch(new RegExp(`^Usage: quotactl overrides ${sub} `));
    }
    expect((await quotactl(['help', 'allow'])).stdout).toMatch(/^Usage: quotactl allow /);
    expect((await quotactl(['overrides', 'set', '--help'])).stdout).toMatch(/^ {2}token_bucket, gcra +--capacity N {2}--refill-per-second R$/m);
  });

  it.each([
    [[], /^Usage: quotactl /],
    [['nope'], /^error: unknown command 'nope'/],
    [['--bogus', 'policies'], /^error: unknown option '--bogus'/],
    [['allow', 'orders'], /^error: missing required argument 'part=value'/],
    [['allow', 'orders', 'user'], /^quotactl: identity: expected part=value \(e\.g\. user=42\), got "user"\n$/],
    [['allow', 'orders', '=42'], /^quotactl: identity: the part name is missing in "=42"/],
    [['allow', 'orders', 'user=1', 'user=2'], /^quotactl: identity\.user: given twice\n$/],
    [['allow', 'orders', 'user=1', '--cost', 'lots'], /^error: option '--cost <n>' argument 'lots' is invalid\. expected a number/],
    [['--timeout', '0', 'policies'], /^error: option '--timeout <ms>' argument '0' is invalid\. expected a whole number from 1 to/],
    [['watch', 'orders', 'user=1', '--interval', 'soon'], /^error: option '--interval <ms>' argument 'soon' is invalid/],
    [
      ['bench', '--policy', 'orders', '--concurrency', '0'],
      /^error: option '--concurrency <n>' argument '0' is invalid\. expected a whole number from 1 to 10000/,
    ],
    [['bench', '--policy', 'orders', '--duration', '2h'], /^error: option '--duration <time>' argument '2h' is invalid\. expected a duration from 1ms to 60m/],
    [['bench', '--policy', 'orders', '--user-part', ''], /^quotactl: --user-part: must not be empty/],
    [['--cert', 'client.crt', 'policies'], /^quotactl: --cert: needs --key/],
    [['--key', 'client.key', 'policies'], /^quotactl: --key: needs --cert/],
    [['--ca', '/nonexistent/ca.crt', 'policies'], /^quotactl: --ca: cannot read \/nonexistent\/ca\.crt: ENOENT/],
    [['--token-file', '/nonexistent/token', 'policies'], /^quotactl: --token-file: cannot read \/nonexistent\/token: ENOENT/],
    [['--token', 'a', '--token-file', 'b', 'policies'], /^quotactl: --token, --token-file: give one of them, not both/],
    [['reset', 'orders'], /^error: missing required argument 'part=value'/],
    [['reset', 'orders', 'user'], /^quotactl: identity: expected part=value/],
    [['overrides'], /^Usage: quotactl overrides /],
    [['overrides', 'frob'], /^error: unknown command 'frob'/],
    [['overrides', 'get', 'orders'], /^error: missing required argument 'value'/],
    [['overrides', 'delete', 'orders', '*'], /^quotactl: VALUE: a wildcard needs a prefix before "\*"/],
    [
      ['overrides', 'set', 'orders', '42', '--capacity', '500', '--ttl', '2'],
      /^error: option '--ttl <duration>' argument '2' is invalid\. expected a duration with its unit, e\.g\. 2h, 90m/,
    ],
    [['overrides', 'set', 'orders', '42', '--capacity', '500', '--ttl', 'soon'], /^error: option '--ttl <duration>' argument 'soon' is invalid/],
    [['overrides', 'set', 'orders', '42', '--capacity', '0'], /^error: option '--capacity <n>' argument '0' is invalid\. expected a number greater than 0/],
    [['overrides', 'set', 'orders', '42', '--limit', '2.5'], /^error: option '--limit <n>' argument '2\.5' is invalid\. expected a whole number/],
    [['overrides', 'set', 'daily', '42', '--window', 'hour'], /^error: unknown option '--window'/],
    [
      ['overrides', 'set', 'orders', '42', '--algorithm', 'token_bucket', '--limit', '10'],
      /^quotactl: --limit: limit "orders" is a token_bucket, whose parameters are --capacity, --refill-per-second\n$/,
    ],
    [['overrides', 'set', 'daily', '42', '--algorithm', 'fixed_window'], /^quotactl: give the new parameters of limit "daily" \(fixed_window\): --limit\n$/],
    [['validate'], /^error: missing required argument 'file'/],
    [['validate', '/nonexistent/policies.yaml'], /^quotactl: cannot read policy file \/nonexistent\/policies\.yaml: ENOENT/],
  ])('%j: exit 2, %s', async (args, message) => {
    const { code, stdout, stderr } = await quotactl(args);
    expect(stderr).toMatch(message);
    expect(stdout).toBe('');
    expect(code).toBe(2);
  });

  it('a bad QUOTACTL_* variable is named like an option', async () => {
    expect(await quotactl(['policies'], { env: { QUOTACTL_TLS: 'maybe' } })).toMatchObject({
      code: 2,
      stderr: 'quotactl: QUOTACTL_TLS: expected 1/true or 0/false, got "maybe"\n',
    });
    expect((await quotactl(['policies'], { env: { QUOTACTL_TIMEOUT_MS: '-5' } })).stderr).toMatch(/^quotactl: QUOTACTL_TIMEOUT_MS: expected a whole number/);
  });

  it("as a process: the exit status is the program's (2 for bad usage, 0 for --version)", async () => {
    const bad = spawnQuotactl(['allow', 'orders', 'user']);
    expect(await bad.exit).toBe(2);
    expect(bad.stderr()).toMatch(/^quotactl: identity: expected part=value/);
    const version = spawnQuotactl(['--version']);
    expect(await version.exit).toBe(0);
    expect(version.stdout()).toMatch(/^\d+\.\d+\.\d+\n$/);
  }, 60_000);
});
