import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createChannel, createClient, Metadata } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { QuotaAdminServiceDefinition } from '@quota-service/contract';
import { ADMIN_TOKEN, writeAdminFixture } from '../../clients/quotactl/admin-fixture.js';
import { useServiceProcess } from '../../clients/quotactl/service.js';
import { type ServiceProcess, startServiceProcess } from '../../support/service-process.js';

/**
 * Hostile YAML wherever the service reads YAML: ValidatePolicies, the policy
 * file, the callers file and Envoy's rate limit configuration, at the start
 * and on reload. An alias bomb ("billion laughs"), nesting thousands deep and
 * an alias inside its own anchor are refused with a message, quickly, never
 * expanded, and never an INTERNAL error or a stack trace. Real service processes.
 */

/** Where a file's value goes: `value` in place of what the file holds there. */
type Place = (value: string) => string;
const POLICIES: Place = (value) => `policies: ${value}\n`;
const CALLERS: Place = (value) => `callers:\n  desk: ${value}\n`;
const RLS: Place = (value) => `domain: edge\ndescriptors: ${value}\n`;

/** Ten anchors, each nine aliases of the one before: 9^9 strings once expanded. */
function aliasBomb(place: Place): string {
  const lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'];
  for (let i = 1; i < 10; i++) lines.push(`l${i}: &l${i} [${Array.from({ length: 9 }, () => `*l${i - 1}`).join(', ')}]`);
  return `${lines.join('\n')}\n${place('*l9')}`;
}
const deepNesting = (place: Place) => place(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
const containsItself = (place: Place) => place('&self { inner: *self }');

const ALIAS_BOMB = /its aliases expand to more than the 100 nodes allowed \(the shape of an "alias bomb"\)/;
const TOO_DEEP = /line \d: nested more than 64 levels deep/;
const ITSELF = /line \d+: an alias inside the node it refers to \(a value that contains itself\)/;

const fixture = writeAdminFixture();
const scratch = mkdtempSync(join(tmpdir(), 'yaml-limits-'));
afterAll(() => {
  fixture.remove();
  rmSync(scratch, { recursive: true, force: true });
});

/** Its exit code, once it exited; killed if it still runs after 10 s (the start should have been refused), so no process outlives the test. */
async function exitOf(started: ServiceProcess): Promise<number | null> {
  const timer = setTimeout(() => started.signal('SIGKILL'), 10_000);
  const code = await started.exit;
  clearTimeout(timer);
  return code;
}

describe('ValidatePolicies', () => {
  const service = useServiceProcess(() => fixture.env);
  const admin = () =>
    createClient(QuotaAdminServiceDefinition, createChannel(service.address()), { '*': { metadata: Metadata({ authorization: `Bearer ${ADMIN_TOKEN}` }) } });

  it.each([
    ['an alias bomb', aliasBomb(POLICIES), ALIAS_BOMB],
    ['100,000 nested brackets', deepNesting(POLICIES), TOO_DEEP],
    ['an alias inside its own anchor', containsItself(POLICIES), ITSELF],
    ['more than 1 MiB', `${POLICIES('{}')}#${'x'.repeat(1_100_000)}\n`, /1100015 characters, more than the 1048576 allowed/],
    ['a key twice in one mapping', 'policies:\n  a: 1\n  b: 2\n  a: 3\n', /Map keys must be unique at line 4/],
  ])('%s: valid false with the reason, in well under a second, and no error logged', async (_name, text, reason) => {
    const started = performance.now();
    const answer = await admin().validatePolicies({ text, source: 'hostile.yaml' });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(answer.valid).toBe(false);
    expect(answer.message).toMatch(new RegExp(`^hostile\\.yaml: invalid YAML: ${reason.source}$`));
    await service.process().logged(/"msg":"admin policies.validate"/);
    expect(service.process().output().stdout).not.toMatch(/"level":50/);
  });

  it('sixty thousand keys: every key compared once, the message lists the first hundred problems', async () => {
    const text = POLICIES(`\n${Array.from({ length: 60_000 }, (_, i) => `  k${i}: 1`).join('\n')}`);
    const started = performance.now();
    const answer = await admin().validatePolicies({ text, source: 'many.yaml' });
    // The yaml package's own duplicate check compares each key with all before it: minutes here.
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(answer.valid).toBe(false);
    const lines = answer.message.split('\n');
    expect(lines).toHaveLength(102);
    expect(lines[1]).toBe('  policies.k0: Invalid input: expected object, received number');
    expect(lines[101]).toBe('  ...and 59900 more');
  });

  it('anchors and aliases within the limits still work', async () => {
    const text =
      'policies:\n  a:\n    limits:\n      - &limit { name: shared, key_by: user, algorithm: token_bucket, capacity: 5, refill_per_second: 1 }\n' +
      '  b:\n    limits: [*limit]\n';
    expect(await admin().validatePolicies({ text, source: '' })).toEqual({ valid: true, message: '', policies: ['a', 'b'] });
  });
});

describe('the files the service reads at the start', () => {
  const write = (name: string, text: string) => {
    const path = join(scratch, name);
    writeFileSync(path, text);
    return path;
  };
  it.each([
    ['the policy file', (text: string) => ({ QUOTA_POLICIES: write('policies.yaml', text) }), POLICIES],
    ['the callers file', (text: string) => ({ QUOTA_AUTH_TOKENS: write('callers.yaml', text) }), CALLERS],
    ['the rate limit configuration', (text: string) => ({ QUOTA_RLS_CONFIG: write('edge.yaml', text) }), RLS],
  ])('%s with an alias bomb or deep nesting: the process exits 1 with one line naming the file and the limit', async (_name, env, place) => {
    for (const [text, reason] of [
      [aliasBomb(place), ALIAS_BOMB],
      [deepNesting(place), TOO_DEEP],
    ] as const) {
      const service = startServiceProcess(env(text));
      expect(await exitOf(service)).toBe(1);
      const { stderr } = service.output();
      expect(stderr).toMatch(reason);
      expect(stderr).toMatch(/^quota-service: \S*(policies|callers|edge)\.yaml: invalid YAML: /);
      // One line: the message, not a stack trace.
      expect(stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});

describe('a reload of the rate limit configuration', () => {
  const dir = mkdtempSync(join(tmpdir(), 'yaml-limits-rls-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'edge.yaml'), 'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n');
  const service = useServiceProcess(() => ({ QUOTA_RLS_CONFIG: dir }));

  it('to descriptors that contain themselves, then to an alias bomb: each rejected with the reason, the loaded configuration kept', async () => {
    await service.process().logged(/health SERVING/);
    const rejected = async (text: string, occurrence: number) => {
      writeFileSync(join(dir, 'edge.yaml'), text);
      return JSON.parse(await service.process().logged(/"msg":"rate limit config reload rejected: keeping the loaded config"/, occurrence)).reason;
    };
    expect(await rejected('domain: edge\ndescriptors: &all\n  - key: user\n    descriptors: *all\n', 1)).toMatch(
      new RegExp(`^edge\\.yaml: invalid YAML: ${ITSELF.source}$`),
    );
    expect(await rejected(aliasBomb(RLS), 2)).toMatch(new RegExp(`^edge\\.yaml: invalid YAML: ${ALIAS_BOMB.source}$`));
    expect(service.process().output().stdout).not.toMatch(/"level":50/);
  });
});
