import { writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { tokenSha256 } from '../../../src/config/callers.js';
import { closedPort } from '../../support/closed-port.js';
import { type QuotactlResult, quotactl } from '../../support/quotactl.js';
import { createTestCertificates } from '../../support/test-certificates.js';
import { useServiceProcess } from './service.js';

// quotactl towards a service on an address other than loopback, as from a
// support person's laptop: a token never leaves in plaintext unless the
// command line says --insecure, and an admin call the service refuses says
// the service's own reason (the admin role, a policy the token may not use,
// or admin calls from loopback only), not a guess.

/** This machine's own non-loopback IPv4 address: a call to it arrives from it, not from 127.0.0.1. */
const OUTSIDE = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

const TOKEN = 'remote-support-token-5d2a8f1c7e3b9046';
const NARROW_TOKEN = 'narrow-admin-token-0c6e2b9d4a7f1358';

const certificates = createTestCertificates();
certificates.authority('ca');
certificates.issue('server', 'ca', `subjectAltName=IP:127.0.0.1,IP:${OUTSIDE ?? '127.0.0.2'}\nextendedKeyUsage=serverAuth\n`);
const file = certificates.file;
writeFileSync(
  file('policies.yaml'),
  `policies:
  orders:
    limits:
      - { name: orders, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 1 }
  api:
    limits:
      - { name: api, key_by: customer, algorithm: token_bucket, capacity: 5, refill_per_second: 1 }
`,
);
// `support` is an admin for every policy, `narrow` an admin for orders only.
writeFileSync(
  file('callers.yaml'),
  `callers:
  support:
    token_sha256: ${tokenSha256(TOKEN)}
    policies: ['*']
    roles: [admin]
  narrow:
    token: ${NARROW_TOKEN}
    policies: [orders]
    roles: [admin]
`,
);
writeFileSync(file('token'), `${TOKEN}\n`);
afterAll(() => certificates.remove());

/** Without caller authentication, listening on every address: the quota API is open, the admin API is for loopback clients. */
const open = useServiceProcess(() => ({ QUOTA_GRPC_ADDR: '0.0.0.0:0', QUOTA_POLICIES: file('policies.yaml') }));
/** With TLS and caller authentication, listening on every address. */
const secured = useServiceProcess(() => ({
  QUOTA_GRPC_ADDR: '0.0.0.0:0',
  QUOTA_POLICIES: file('policies.yaml'),
  QUOTA_TLS_CERT: file('server.crt'),
  QUOTA_TLS_KEY: file('server.key'),
  QUOTA_AUTH_TOKENS: file('callers.yaml'),
}));

const port = (address: string) => address.slice(address.lastIndexOf(':') + 1);
const outside = (service: { address(): string }) => {
  expect(OUTSIDE, 'a non-loopback IPv4 interface').toBeDefined();
  return `${OUTSIDE}:${port(service.address())}`;
};

const outputs: QuotactlResult[] = [];
async function run(args: readonly string[], env: Record<string, string> = {}): Promise<QuotactlResult> {
  const result = await quotactl(args, { env });
  outputs.push(result);
  return result;
}

describe('quotactl and a token in plaintext', () => {
  it('refuses to send a token unencrypted to a non-loopback address, naming --insecure; nothing is sent', async () => {
    const address = outside(open);
    for (const [args, env, source] of [
      [['--token', TOKEN], {}, '--token'],
      [['--token-file', file('token')], {}, '--token-file'],
      [[], { QUOTACTL_TOKEN: TOKEN }, 'QUOTACTL_TOKEN'],
      [[], { QUOTACTL_TOKEN_FILE: file('token') }, 'QUOTACTL_TOKEN_FILE'],
    ] as const) {
      const { code, stdout, stderr } = await run(['--addr', address, ...args, 'allow', 'orders', 'user=plain-1'], env);
      expect({ source, code, stdout }).toEqual({ source, code: 2, stdout: '' });
      expect(stderr).toBe(
        `quotactl: ${source}: refusing to send the token in plaintext to ${address}, which is not a loopback address: ` +
          'connect with TLS (--tls or --ca), or give --insecure to send it unencrypted anyway\n',
      );
    }
    // Nothing was spent: the whole bucket is still there.
    const peek = await run(['--addr', address, '--json', 'peek', 'orders', 'user=plain-1']);
    expect(peek.code, peek.stderr).toBe(0);
    expect(JSON.parse(peek.stdout)).toMatchObject({ limits: [{ name: 'orders', remaining: 10 }] });
  });

  it('--insecure sends it anyway', async () => {
    const { code, stderr } = await run(['--addr', outside(open), '--token', TOKEN, '--insecure', 'allow', 'orders', 'user=plain-2']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('needs no --insecure on loopback, without a token, or with TLS', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const { code, stderr } = await run(['--addr', `${host}:${port(open.address())}`, '--token', TOKEN, 'allow', 'orders', 'user=plain-3']);
      expect({ host, code, stderr }).toEqual({ host, code: 0, stderr: '' });
    }
    const anonymous = await run(['--addr', outside(open), 'allow', 'orders', 'user=plain-3']);
    expect({ code: anonymous.code, stderr: anonymous.stderr }).toEqual({ code: 0, stderr: '' });
    const tls = await run(['--addr', outside(secured), '--ca', file('ca.crt'), '--token', TOKEN, 'allow', 'orders', 'user=plain-3']);
    expect({ code: tls.code, stderr: tls.stderr }).toEqual({ code: 0, stderr: '' });
  });
});

describe('quotactl: which addresses count as loopback', () => {
  it('loopback forms are tried (exit 3 from a closed port); any other address or host name is refused before a connection (exit 2)', async () => {
    const closed = await closedPort();
    for (const addr of [
      `127.0.0.1:${closed}`,
      `127.0.0.2:${closed}`,
      `localhost:${closed}`,
      `[::1]:${closed}`,
      `ipv4:127.0.0.1:${closed}`,
      `dns:///localhost:${closed}`,
    ]) {
      const { code, stderr } = await run(['--addr', addr, '--token', TOKEN, '--timeout', '2000', 'peek', 'orders', 'user=lo']);
      expect({ addr, code }, stderr).toEqual({ addr, code: 3 });
    }
    for (const addr of [
      '198.51.100.7:50051',
      'quota.example:50051',
      'localhost.example:50051',
      '127.0.0.1.example:50051',
      '[2001:db8::1]:50051',
      'ipv4:127.0.0.1:1,198.51.100.7:2',
    ]) {
      const { code, stderr } = await run(['--addr', addr, '--token', TOKEN, 'peek', 'orders', 'user=lo']);
      expect({ addr, code }).toEqual({ addr, code: 2 });
      expect(stderr).toMatch(/--insecure/);
    }
  });
});

describe("quotactl admin commands refused: the service's reason", () => {
  it('without caller authentication, from a non-loopback address: admin calls are for loopback clients only (no token helps)', async () => {
    const anonymous = await run(['--addr', outside(open), 'overrides', 'list']);
    expect({ code: anonymous.code, stdout: anonymous.stdout }).toEqual({ code: 4, stdout: '' });
    expect(anonymous.stderr).toMatch(
      /^quotactl: PERMISSION_DENIED: the service has no caller authentication, so it takes admin calls from loopback clients only: run quotactl on the service's machine; the service said: .*only loopback clients.*\n$/,
    );
    const withToken = await run(['--addr', outside(open), '--token', TOKEN, '--insecure', 'reset', 'orders', 'user=plain-4']);
    expect({ code: withToken.code, stdout: withToken.stdout }).toEqual({ code: 4, stdout: '' });
    expect(withToken.stderr).toMatch(
      /^quotactl: PERMISSION_DENIED: the service has no caller authentication, so it takes admin calls from loopback clients only, whatever the token: run quotactl on the service's machine; the service said: .*only loopback clients.*\n$/,
    );
    expect(withToken.stderr).not.toMatch(/admin role/);
  });

  it('an admin token that may not use the policy: says so, not that it lacks the admin role', async () => {
    const tls = ['--addr', outside(secured), '--ca', file('ca.crt'), '--token', NARROW_TOKEN];
    expect((await run([...tls, 'reset', 'orders', 'user=plain-5'])).code).toBe(0);
    const { code, stdout, stderr } = await run([...tls, 'reset', 'api', 'customer=plain-5']);
    expect({ code, stdout }).toEqual({ code: 4, stdout: '' });
    expect(stderr).toBe(
      "quotactl: PERMISSION_DENIED: the token's caller may not use this policy (its policies in the service's callers file); " +
        'the service said: caller "narrow" may not use policy "api"\n',
    );
  });

  it('no run printed a token', () => {
    expect(outputs.length).toBeGreaterThan(10);
    for (const { stdout, stderr } of outputs) {
      for (const token of [TOKEN, NARROW_TOKEN]) {
        expect(stdout).not.toContain(token);
        expect(stderr).not.toContain(token);
      }
    }
  });
});
