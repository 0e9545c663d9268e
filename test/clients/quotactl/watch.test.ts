import { afterAll, describe, expect, it } from 'vitest';
import { jsonLines, quotactl, spawnQuotactl } from '../../support/quotactl.js';
import { writeFixturePolicies } from './fixture-policies.js';
import { useServiceProcess } from './service.js';

// quotactl watch against a real service process. The `daily` policy's numbers
// change only when something spends (its window turns at midnight UTC), so
// each change the test makes must show exactly once.

const policies = writeFixturePolicies();
afterAll(() => policies.remove());
const service = useServiceProcess(() => ({ QUOTA_POLICIES: policies.path }));
const env = () => ({ QUOTACTL_ADDR: service.address() });

/** Resolves when `check` holds for the text written so far. */
function waitFor(check: (stdout: string) => boolean): { onStdout: (stdout: string) => void; reached: Promise<void> } {
  let resolve!: () => void;
  const reached = new Promise<void>((r) => (resolve = r));
  return { onStdout: (stdout) => check(stdout) && resolve(), reached };
}

describe('quotactl watch', () => {
  it('--json: one document per change, none while nothing changes; Ctrl-C ends it with exit 0', async () => {
    const interrupt = new AbortController();
    let lines = 0;
    let polls = 0;
    const first = waitFor((stdout) => stdout.includes('"remaining":100'));
    const spent = waitFor((stdout) => stdout.includes('"remaining":90'));
    const running = quotactl(['--json', 'watch', 'daily', 'user=watch-1', '--interval', '20'], {
      env: env(),
      interrupt: interrupt.signal,
      onStdout: (stdout) => {
        lines = stdout.split('\n').length - 1;
        first.onStdout(stdout);
        spent.onStdout(stdout);
      },
    });
    await first.reached;
    // Many polls with nothing spent: still one line.
    for (; polls < 10; polls++) expect((await quotactl(['--json', 'peek', 'daily', 'user=watch-1'], { env: env() })).code).toBe(0);
    expect(lines).toBe(1);
    for (const cost of ['3', '7']) expect((await quotactl(['allow', 'daily', 'user=watch-1', '--cost', cost], { env: env() })).code).toBe(0);
    await spent.reached;
    interrupt.abort();
    const { code, stdout, stderr } = await running;
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const docs = jsonLines<{ time: string; policy: string; identity: Record<string, string>; limits: { name: string; remaining: number }[] }>(stdout);
    // 100, then 97 if a poll fell between the two spends, then 90: each value once.
    const seen = docs.map((d) => d.limits[0]!.remaining);
    expect(seen[0]).toBe(100);
    expect(seen.at(-1)).toBe(90);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.every((r) => [100, 97, 90].includes(r))).toBe(true);
    expect(docs[0]).toMatchObject({ policy: 'daily', identity: { user: 'watch-1' }, limits: [{ name: 'daily', remaining: 100 }] });
    expect(Number.isNaN(Date.parse(docs[0]!.time))).toBe(false);
  });

  it('on a terminal: the table is redrawn in place (cursor up, clear) at every answer', async () => {
    const interrupt = new AbortController();
    const redrawn = waitFor((stdout) => stdout.split('\x1b[0J').length >= 4);
    const running = quotactl(['watch', 'daily', 'user=watch-2', '--interval', '20'], {
      env: { ...env(), NO_COLOR: '1' },
      tty: true,
      interrupt: interrupt.signal,
      onStdout: redrawn.onStdout,
    });
    await redrawn.reached;
    interrupt.abort();
    const { code, stdout } = await running;
    expect(code).toBe(0);
    const frames = stdout.split(/\x1b\[\d+A\r\x1b\[0J/);
    // Every frame after the first erases exactly the lines of the one before.
    const ups = [...stdout.matchAll(/\x1b\[(\d+)A/g)].map((m) => Number(m[1]));
    expect(ups.length).toBeGreaterThanOrEqual(2);
    for (const [i, up] of ups.entries()) expect(up).toBe(frames[i]!.replace(/^\r\x1b\[0J/, '').split('\n').length - 1);
    expect(frames.at(-1)).toMatch(/^daily user=watch-2 .*Ctrl-C to stop\n┌/);
    expect(frames.at(-1)).toMatch(/│ daily +│ fixed_window +│ +100 │ +100 │/);
  });

  it('as a process, piped: a line per change, and Ctrl-C (SIGINT) exits 0', async () => {
    const watch = spawnQuotactl(['watch', 'daily', 'user=watch-3', '--interval', '20'], env());
    await watch.until(/daily=100\/100\n/);
    expect((await quotactl(['allow', 'daily', 'user=watch-3', '--cost', '5'], { env: env() })).code).toBe(0);
    await watch.until(/daily=95\/100\n/);
    watch.signal('SIGINT');
    expect(await watch.exit).toBe(0);
    const lines = watch.stdout().trimEnd().split('\n');
    expect(lines.map((l) => l.replace(/^\S+ /, ''))).toEqual(['daily=100/100', 'daily=95/100']);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z daily=100\/100$/);
    expect(watch.stderr()).toBe('');
  }, 60_000);

  it('an unknown policy ends it at once: exit 5', async () => {
    expect(await quotactl(['watch', 'nope', 'user=1'], { env: env() })).toMatchObject({
      code: 5,
      stderr: 'quotactl: NOT_FOUND: policy: no policy named "nope"\n',
    });
  });
});
