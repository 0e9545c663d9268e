import { afterAll, describe, expect, it } from 'vitest';
import { createChannel, createClient } from 'nice-grpc';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { jsonLines, quotactl } from '../../support/quotactl.js';
import { rlsConfigDir } from '../../support/rls-client.js';
import { useServiceProcess } from './service.js';

// quotactl rls against a real service with a rate limit config; the service's
// denial lines, found with quotactl hash; how a flood of denials is bounded in
// the log; quotactl's words for the service's field errors.

const dir = mkdtempSync(join(tmpdir(), 'quotactl-rls-'));
const policies = join(dir, 'policies.yaml');
writeFileSync(
  policies,
  `policies:
  orders:
    limits:
      - { name: orders, key_by: user, algorithm: token_bucket, capacity: 3, refill_per_second: 0.001 }
  flood:
    limits:
      - { name: flood, key_by: user, algorithm: token_bucket, capacity: 5, refill_per_second: 0.001 }
`,
);
const rls = rlsConfigDir({
  'edge.yaml': `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: path
    rate_limit: { unit: hour, requests_per_unit: 100 }
`,
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(rls, { recursive: true, force: true });
});
const service = useServiceProcess(() => ({ QUOTA_POLICIES: policies, QUOTA_RLS_CONFIG: rls }));
const run = (args: readonly string[]) => quotactl(args, { env: { QUOTACTL_ADDR: service.address() } });

/** The service's denial lines so far, parsed. */
const denialLines = () =>
  jsonLines<Record<string, unknown>>(service.process().output().stdout).filter((line) => line.component === 'denials' && line.msg === 'denied');

describe('quotactl rls', () => {
  it('one ShouldRateLimit: OK while under the limit (exit 0), OVER_LIMIT after (exit 1), per descriptor its limit, remaining and reset', async () => {
    const first = await run(['rls', 'edge', 'remote_address=10.0.0.1']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const lines = first.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('OK edge remote_address=10.0.0.1');
    expect(lines[1]!.split(/\s{2,}/)).toEqual(['DESCRIPTOR', 'CODE', 'LIMIT', 'REMAINING', 'RESETS_IN']);
    expect(lines[2]!.split(/\s{2,}/).slice(0, 4)).toEqual(['remote_address=10.0.0.1', 'OK', '2 per hour', '1']);

    const over = await run(['--json', 'rls', 'edge', 'remote_address=10.0.0.1', '--hits', '2']);
    expect(over.code).toBe(1);
    const [doc] = jsonLines<{ overallCode: string; statuses: Record<string, unknown>[] }>(over.stdout);
    expect(doc!.overallCode).toBe('OVER_LIMIT');
    expect(doc!.statuses[0]).toMatchObject({
      descriptor: [{ key: 'remote_address', value: '10.0.0.1' }],
      code: 'OVER_LIMIT',
      // A rule without a name answers none, as envoyproxy/ratelimit does.
      limit: { name: '', requestsPerUnit: 2, unit: 'HOUR' },
      remaining: 1,
    });
    expect(doc!.statuses[0]!.resetAfterMs as number).toBeGreaterThan(0);
  });

  it('--descriptor adds descriptors: each gets its own status, one without a rule says so', async () => {
    const both = await run(['--json', 'rls', 'edge', '--descriptor', 'path=/a', '--descriptor', 'unknown=x']);
    expect(both.code).toBe(0);
    const [doc] = jsonLines<{ overallCode: string; statuses: { code: string; limit: unknown; remaining: number }[] }>(both.stdout);
    expect(doc!.overallCode).toBe('OK');
    expect(doc!.statuses.map((s) => [s.code, s.limit === null, s.remaining])).toEqual([
      ['OK', false, 99],
      ['OK', true, 0],
    ]);
    const none = await run(['rls', 'edge']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^quotactl: descriptor: give key=value entries/);
  });
});

describe('denials in the log', () => {
  it('a denial by Allow and by ShouldRateLimit each logs a line found with quotactl hash; the value never appears', async () => {
    for (let i = 0; i < 3; i++) expect((await run(['allow', 'orders', 'user=alice-secret-7'])).code).toBe(0);
    expect((await run(['allow', 'orders', 'user=alice-secret-7'])).code).toBe(1);
    const hashed = await run(['hash', 'user=alice-secret-7']);
    expect(hashed.code).toBe(0);
    const digest = /^user=([0-9a-f]{16})$/.exec(hashed.stdout.trim())![1]!;
    const line = JSON.parse(await service.process().logged(new RegExp(`"user":"${digest}"`)));
    expect(line).toMatchObject({ level: 30, component: 'denials', msg: 'denied', policy: 'orders', deniedBy: 'orders', source: 'store', door: 'Allow' });
    expect(line.identity).toEqual({ user: digest });

    for (let i = 0; i < 2; i++) await run(['rls', 'edge', 'remote_address=203.0.113.9']);
    expect((await run(['rls', 'edge', 'remote_address=203.0.113.9'])).code).toBe(1);
    const address = (await run(['--json', 'hash', 'remote_address=203.0.113.9'])).stdout;
    const addressDigest = (JSON.parse(address) as { identity: { remote_address: string } }).identity.remote_address;
    const rlsLine = JSON.parse(await service.process().logged(new RegExp(`"remote_address":"${addressDigest}"`)));
    expect(rlsLine).toMatchObject({ policy: 'rls:edge', deniedBy: 'remote_address', source: 'store', door: 'ShouldRateLimit' });

    const { stdout } = service.process().output();
    expect(stdout).not.toContain('alice-secret-7');
    expect(stdout).not.toContain('203.0.113.9');
  });

  it('a denial through AllowStream says so (door AllowStream)', async () => {
    const channel = createChannel(service.address());
    const client = createClient(QuotaServiceDefinition, channel);
    try {
      const request = { policy: 'orders', identity: { user: 'stream-9' }, cost: 1, requestId: '' };
      async function* batches() {
        yield { id: 1, requests: [request, request, request, request] };
      }
      for await (const answer of client.allowStream(batches())) {
        expect(answer.results.map((r) => r.response?.allowed)).toEqual([true, true, true, false]);
      }
      const digest = JSON.parse((await run(['--json', 'hash', 'user=stream-9'])).stdout).identity.user as string;
      const line = JSON.parse(await service.process().logged(new RegExp(`"user":"${digest}"`)));
      expect(line).toMatchObject({ policy: 'orders', deniedBy: 'orders', door: 'AllowStream' });
    } finally {
      channel.close();
    }
  });

  it('a flood of denials writes at most 10 lines per policy per second; the next line counts the ones left out', async () => {
    const channel = createChannel(service.address());
    const client = createClient(QuotaServiceDefinition, channel);
    try {
      const request = { policy: 'flood', identity: { user: 'flood-1' }, cost: 1, requestId: '' };
      const started = Date.now();
      const { results } = await client.allowBatch({ requests: Array.from({ length: 400 }, () => request) });
      expect(results.filter((r) => r.response?.allowed === false)).toHaveLength(395);
      const suppressedLine = service.process().logged(/"policy":"flood"[^\n]*"suppressed":\d+/);
      let seen = false;
      void suppressedLine.then(() => (seen = true));
      // The next denial in a later second writes a line with the count: ask until it has.
      let more = 0;
      const giveUp = Date.now() + 10_000;
      while (!seen && Date.now() < giveUp) {
        await client.allow(request);
        more++;
      }
      expect(seen, 'a denial line with "suppressed" within 10 s').toBe(true);
      const seconds = (Date.now() - started) / 1000;
      const lines = denialLines().filter((l) => l.policy === 'flood');
      expect(lines.length).toBeLessThanOrEqual(10 * (Math.ceil(seconds) + 1));
      const batchLines = lines.filter((l) => l.door === 'AllowBatch');
      expect(batchLines.length).toBeGreaterThanOrEqual(10);
      expect(batchLines.length).toBeLessThanOrEqual(20);
      const withCount = lines.find((l) => l.suppressed !== undefined)!;
      // Every denial is either a line or counted on a later one.
      const before = lines.slice(0, lines.indexOf(withCount) + 1);
      expect(before.length + (withCount.suppressed as number)).toBeLessThanOrEqual(395 + more);
      expect(before.length + (withCount.suppressed as number)).toBeGreaterThanOrEqual(395);
    } finally {
      channel.close();
    }
  });
});

describe("quotactl's words for the service's field errors", () => {
  it('an override capacity too large blames --capacity; a TTL too long is shown in days', async () => {
    const huge = await run(['overrides', 'set', 'orders', 'o-1', '--capacity', '1e12']);
    expect(huge.code).toBe(5);
    expect(huge.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: --capacity \(parameters\.token_bucket\.capacity\): capacity \/ refill_per_second is too large/);
    const slow = await run(['overrides', 'set', 'orders', 'o-1', '--refill-per-second', '1e-12']);
    expect(slow.stderr).toMatch(/^quotactl: INVALID_ARGUMENT: --refill-per-second \(parameters\.token_bucket\.refill_per_second\): /);
    const ttl = await run(['overrides', 'set', 'orders', 'o-1', '--capacity', '4', '--ttl', '400d']);
    expect(ttl).toMatchObject({
      code: 5,
      stderr: 'quotactl: INVALID_ARGUMENT: --ttl (ttl_ms): must be a duration from 0 (never expires) to 366d, got 400d\n',
    });
  });
});
