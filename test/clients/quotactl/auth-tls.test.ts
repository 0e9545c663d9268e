import { writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { tokenSha256 } from '../../../src/config/callers.js';
import { jsonLines, type QuotactlResult, quotactl, spawnQuotactl } from '../../support/quotactl.js';
import { CLIENT, createTestCertificates, LOOPBACK_SERVER } from '../../support/test-certificates.js';
import { useServiceProcess } from './service.js';

// quotactl against a service with mutual TLS and bearer tokens on: the TLS
// options and the token, from flags, files and QUOTACTL_* variables. No run
// may print the token, whatever happens.

const SUPPORT_TOKEN = 'support-desk-token-4e1c7a9b2f6d8035';
const ORDERS_TOKEN = 'order-api-token-93b0c5e7a1d24f68';
const certificates = createTestCertificates();
certificates.authority('ca');
certificates.authority('other-ca');
certificates.issue('server', 'ca', LOOPBACK_SERVER);
certificates.issue('client', 'ca', CLIENT);
certificates.issue('stranger', 'other-ca', CLIENT);
const file = certificates.file;
writeFileSync(
  file('callers.yaml'),
  `callers:\n  support:\n    token_sha256: ${tokenSha256(SUPPORT_TOKEN)}\n    policies: ['*']\n  order-api:\n    token: ${ORDERS_TOKEN}\n    policies: [orders]\n`,
);
writeFileSync(file('token'), `${SUPPORT_TOKEN}\n`);
afterAll(() => certificates.remove());

const service = useServiceProcess(() => ({
  QUOTA_TLS_CERT: file('server.crt'),
  QUOTA_TLS_KEY: file('server.key'),
  QUOTA_TLS_CLIENT_CA: file('ca.crt'),
  QUOTA_AUTH_TOKENS: file('callers.yaml'),
}));

const outputs: QuotactlResult[] = [];
/** quotactl with the given environment; every run's output is kept for the check that no token was printed. */
async function run(args: readonly string[], env: Record<string, string> = {}): Promise<QuotactlResult> {
  const result = await quotactl(['--addr', service.address(), ...args], { env });
  outputs.push(result);
  return result;
}
const mtls = ['--ca', file('ca.crt'), '--cert', file('client.crt'), '--key', file('client.key')];

describe('quotactl with TLS and a token', () => {
  it('the token from --token, --token-file, QUOTACTL_TOKEN or QUOTACTL_TOKEN_FILE: decided', async () => {
    for (const [args, env] of [
      [['--token', SUPPORT_TOKEN], {}],
      [['--token-file', file('token')], {}],
      [[], { QUOTACTL_TOKEN: SUPPORT_TOKEN }],
      [[], { QUOTACTL_TOKEN_FILE: file('token') }],
    ] as const) {
      const { code, stdout, stderr } = await run([...mtls, ...args, '--json', 'allow', 'orders', 'user=tls-1'], env);
      expect({ args, env, stderr, code }).toEqual({ args, env, stderr: '', code: 0 });
      expect(jsonLines(stdout)[0]).toMatchObject({ allowed: true, source: 'store' });
    }
  });

  it('TLS settings from QUOTACTL_CA, QUOTACTL_CERT and QUOTACTL_KEY; the command line wins over them', async () => {
    const env = { QUOTACTL_CA: file('ca.crt'), QUOTACTL_CERT: file('client.crt'), QUOTACTL_KEY: file('client.key'), QUOTACTL_TOKEN: SUPPORT_TOKEN };
    expect((await run(['peek', 'orders', 'user=tls-2'], env)).code).toBe(0);
    const overridden = await run(['--cert', file('stranger.crt'), '--key', file('stranger.key'), 'peek', 'orders', 'user=tls-2'], env);
    expect(overridden.code).toBe(3);
  });

  it('no token, or an unknown one: exit 4 UNAUTHENTICATED; a policy the token may not use: exit 4 PERMISSION_DENIED', async () => {
    const none = await run([...mtls, 'allow', 'orders', 'user=tls-3']);
    expect(none.code).toBe(4);
    expect(none.stderr).toMatch(/^quotactl: UNAUTHENTICATED: missing bearer token/);
    const unknown = await run([...mtls, '--token', 'not-a-token-the-service-knows', 'allow', 'orders', 'user=tls-3']);
    expect(unknown).toMatchObject({ code: 4, stderr: 'quotactl: UNAUTHENTICATED: unknown bearer token\n' });
    const other = await run([...mtls, '--token', ORDERS_TOKEN, 'allow', 'user', 'user=tls-3']);
    expect(other).toMatchObject({ code: 4, stderr: 'quotactl: PERMISSION_DENIED: caller "order-api" may not use policy "user"\n' });
    // ListPolicies shows a token only the policies it may use.
    const listed = await run([...mtls, '--token', ORDERS_TOKEN, '--json', 'policies']);
    expect(jsonLines<{ policies: { name: string }[] }>(listed.stdout)[0]!.policies.map((p) => p.name)).toEqual(['orders']);
  });

  it('plaintext to the TLS port, a CA that did not sign the server, or no client certificate: exit 3', async () => {
    const token = ['--token', SUPPORT_TOKEN];
    for (const args of [
      [],
      ['--ca', file('other-ca.crt'), '--cert', file('client.crt'), '--key', file('client.key')],
      ['--ca', file('ca.crt')],
      ['--ca', file('ca.crt'), '--cert', file('stranger.crt'), '--key', file('stranger.key')],
    ]) {
      const { code, stderr } = await run(['--timeout', '3000', ...token, ...args, 'policies']);
      expect({ args, code }).toEqual({ args, code: 3 });
      expect(stderr).toMatch(/^quotactl: (UNAVAILABLE|DEADLINE_EXCEEDED): /);
    }
  });

  it('--tls trusts the CAs Node trusts (here NODE_EXTRA_CA_CERTS), as a process', async () => {
    const process = spawnQuotactl(
      ['--addr', service.address(), '--tls', '--cert', file('client.crt'), '--key', file('client.key'), '--json', 'peek', 'orders', 'user=tls-4'],
      {
        NODE_EXTRA_CA_CERTS: file('ca.crt'),
        QUOTACTL_TOKEN: SUPPORT_TOKEN,
      },
    );
    expect(await process.exit).toBe(0);
    expect(process.stderr()).toBe('');
    expect(jsonLines(process.stdout())[0]).toMatchObject({ policy: 'orders', limits: [{ name: 'orders', limit: 10 }] });
    outputs.push({ code: 0, stdout: process.stdout(), stderr: process.stderr() });
  }, 60_000);

  it('no run printed a token', () => {
    expect(outputs.length).toBeGreaterThan(10);
    for (const { stdout, stderr } of outputs) {
      for (const token of [SUPPORT_TOKEN, ORDERS_TOKEN]) {
        expect(stdout).not.toContain(token);
        expect(stderr).not.toContain(token);
      }
    }
  });
});
