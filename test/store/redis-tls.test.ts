import { createChannel, createClient } from 'nice-grpc';
import { beforeAll, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import type { RedisServer } from '../support/redis-server.js';
import { untilServing } from '../support/service-process.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { redisTlsFixture } from '../support/redis-tls-fixture.js';

/** One redis-server over TLS; the 3+3 cluster over TLS is redis-tls-cluster.test.ts. */
const { certificates, file, tlsRedis, service, stopService, elevenOrders, pemBody, expectRefused } = redisTlsFixture();

describe('one Redis node over TLS only (no plain port)', () => {
  it('rediss:// with QUOTA_REDIS_TLS_CA: SERVING, and orders decided in Redis (10 allowed, the 11th denied)', async () => {
    const redis = await tlsRedis();
    expect(redis.url).toBe(`rediss://127.0.0.1:${redis.tlsPort}`);
    expect(await redis.client().config('GET', 'port')).toEqual(['port', '0']); // no plain port at all
    const started = service({ QUOTA_REDIS_URL: redis.url, QUOTA_REDIS_TLS_CA: file('ca.crt') });
    const channel = createChannel(`127.0.0.1:${await started.port}`);
    try {
      expect(await elevenOrders(channel, 'tls')).toEqual([...Array(10).fill(true), false]);
    } finally {
      channel.close();
    }
    expect(await redis.client().exists('rl:v1:orders:user:{tls}')).toBe(1);
    await stopService(started);
    expect(started.output().stdout).toMatch(/"tls":"verified against QUOTA_REDIS_TLS_CA","store":"redis 127\.0\.0\.1:\d+","msg":"deciding in Redis"/);
  });

  it("a CA that did not sign Redis's certificate: not SERVING, a clear error, nothing decided in Redis", async () => {
    const redis = await tlsRedis();
    await expectRefused(
      redis,
      { QUOTA_REDIS_TLS_CA: file('other-ca.crt') },
      {
        // Redis sends its CA along with its certificate: a chain ending in a CA nobody here trusts.
        code: /"code":"SELF_SIGNED_CERT_IN_CHAIN"/,
        hint: /not signed by a CA this service trusts: set QUOTA_REDIS_TLS_CA/,
      },
    );
  });

  it('no QUOTA_REDIS_TLS_CA: the system CAs do not know a private CA either', async () => {
    const redis = await tlsRedis();
    await expectRefused(redis, {}, { code: /"code":"SELF_SIGNED_CERT_IN_CHAIN"/, hint: /set QUOTA_REDIS_TLS_CA/ });
  });

  it('a certificate from the right CA but for another name (DNS:localhost only) is rejected for 127.0.0.1', async () => {
    const redis = await tlsRedis({ cert: 'redis-localhost-only' });
    await expectRefused(
      redis,
      { QUOTA_REDIS_TLS_CA: file('ca.crt') },
      {
        code: /"code":"ERR_TLS_CERT_ALTNAME_INVALID"/,
        hint: /not issued for the host or IP this service connects to/,
      },
    );
  });
});

describe('bad TLS files stop the start, naming the variable and never the contents', () => {
  it.each([
    [
      'an unreadable CA',
      { QUOTA_REDIS_TLS_CA: '/nonexistent/redis-ca.pem' },
      /^quota-service: invalid configuration:\n {2}QUOTA_REDIS_TLS_CA: cannot read \/nonexistent\/redis-ca\.pem: ENOENT/,
    ],
    [
      "a key that is not the certificate's",
      { QUOTA_REDIS_TLS_CA: 'ca.crt', QUOTA_REDIS_TLS_CERT: 'client.crt', QUOTA_REDIS_TLS_KEY: 'stranger.key' },
      /^quota-service: invalid configuration:\n {2}QUOTA_REDIS_TLS_KEY: .*stranger\.key is not the private key of the certificate in QUOTA_REDIS_TLS_CERT/,
    ],
  ])('%s: exit 1', async (_case, variables, expected) => {
    const env = Object.fromEntries(Object.entries(variables).map(([name, path]) => [name, path.startsWith('/') ? path : file(path)]));
    const started = service({ QUOTA_REDIS_URL: 'rediss://127.0.0.1:1', ...env });
    expect(await started.exit).toBe(1);
    const { stdout, stderr } = started.output();
    expect(stderr).toMatch(expected);
    for (const line of [...pemBody('stranger.key'), ...pemBody('client.crt'), ...pemBody('ca.crt')]) expect(stdout + stderr).not.toContain(line);
  });
});

describe('one Redis node with tls-auth-clients yes (a client certificate required)', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await tlsRedis({ authClients: true });
  });

  it('with QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY: SERVING and decided in Redis', async () => {
    const started = service({
      QUOTA_REDIS_URL: redis.url,
      QUOTA_REDIS_TLS_CA: file('ca.crt'),
      QUOTA_REDIS_TLS_CERT: file('client.crt'),
      QUOTA_REDIS_TLS_KEY: file('client.key'),
    });
    const channel = createChannel(`127.0.0.1:${await started.port}`);
    try {
      expect(await elevenOrders(channel, 'mtls')).toEqual([...Array(10).fill(true), false]);
    } finally {
      channel.close();
    }
    expect(await redis.client().exists('rl:v1:orders:user:{mtls}')).toBe(1);
    await redis.client().flushall();
    await stopService(started);
    const log = started.output().stdout + started.output().stderr;
    expect(log).toContain('"tls":"verified against QUOTA_REDIS_TLS_CA, client certificate"');
    for (const line of [...pemBody('client.key'), ...pemBody('client.crt')]) expect(log).not.toContain(line);
  });

  it('without a client certificate: never SERVING, the error says to set one, and no secret reaches the log', async () => {
    const log = await expectRefused(
      redis,
      { QUOTA_REDIS_TLS_CA: file('ca.crt') },
      {
        // Under TLS 1.3 the refusal comes after the handshake: as Redis's alert or, as often, a reset.
        code: /"code":"(ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED|ECONNRESET)"/,
        hint: /set QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY/,
      },
    );
    for (const line of pemBody('ca.crt')) expect(log).not.toContain(line);
  });

  it('a renewed client certificate in a Secret volume is presented from the next connection on, without a restart', async () => {
    const volume = new ConfigMapVolume({ 'tls.crt': certificates.pem('client.crt').toString(), 'tls.key': certificates.pem('client.key').toString() });
    const started = service({
      QUOTA_REDIS_URL: redis.url,
      QUOTA_REDIS_TLS_CA: file('ca.crt'),
      QUOTA_REDIS_TLS_CERT: volume.path('tls.crt'),
      QUOTA_REDIS_TLS_KEY: volume.path('tls.key'),
    });
    const channel = createChannel(`127.0.0.1:${await started.port}`);
    const admin = redis.client();
    try {
      await untilServing(channel);
      const client = createClient(QuotaServiceDefinition, channel);
      const sourceOf = async (user: string) => (await client.allow({ policy: 'orders', identity: { user } })).source;
      expect(await sourceOf('before')).toBe(DecisionSource.DECISION_SOURCE_STORE);

      // A mismatched pair first (the new certificate, the old key): refused, the loaded pair stays.
      volume.update({ 'tls.crt': certificates.pem('renewed-client.crt').toString(), 'tls.key': certificates.pem('client.key').toString() });
      expect(await started.logged(/"msg":"Redis TLS reload rejected/)).toMatch(/QUOTA_REDIS_TLS_KEY: .* is not the private key of the certificate/);
      volume.update({ 'tls.crt': certificates.pem('renewed-client.crt').toString(), 'tls.key': certificates.pem('renewed-client.key').toString() });
      expect(await started.logged(/"msg":"Redis TLS files reloaded/)).toContain('CN=renewed-client');
      // The open connection goes on with the certificate it presented.
      expect(await sourceOf('between')).toBe(DecisionSource.DECISION_SOURCE_STORE);

      // Redis now trusts only the new CA, and drops the service's connection (the one whose
      // last command was a script call; the harness's own stay): only the renewed
      // certificate gets the service back in.
      await admin.config('SET', 'tls-ca-cert-file', file('other-ca.crt'));
      const list = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'normal'));
      const scripting = [...list.matchAll(/^id=(\d+) .* cmd=(fcall|evalsha|eval) /gm)].map((match) => match[1] as string);
      expect(scripting).toHaveLength(1);
      await admin.call('CLIENT', 'KILL', 'ID', ...scripting);
      const deadline = Date.now() + 10_000;
      let source = await sourceOf('after');
      while (source !== DecisionSource.DECISION_SOURCE_STORE && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        source = await sourceOf('after');
      }
      expect(source).toBe(DecisionSource.DECISION_SOURCE_STORE);
      await admin.flushall();
    } finally {
      await admin.config('SET', 'tls-ca-cert-file', file('ca.crt'));
      admin.disconnect();
      channel.close();
      volume.remove();
    }
    await stopService(started);
    const log = started.output().stdout + started.output().stderr;
    for (const line of [...pemBody('client.key'), ...pemBody('renewed-client.key')]) expect(log).not.toContain(line);
  });

  it('with a client certificate from a CA Redis does not trust: refused the same way', async () => {
    const log = await expectRefused(
      redis,
      { QUOTA_REDIS_TLS_CA: file('ca.crt'), QUOTA_REDIS_TLS_CERT: file('stranger.crt'), QUOTA_REDIS_TLS_KEY: file('stranger.key') },
      {
        code: /"code":"(ERR_SSL_TLSV1_ALERT_UNKNOWN_CA|ECONNRESET)"/,
        hint: /(the one in QUOTA_REDIS_TLS_CERT must be signed by a CA in Redis's tls-ca-cert-file|Redis refused this service's TLS handshake, likely its client certificate)/,
      },
    );
    for (const line of [...pemBody('stranger.key'), ...pemBody('stranger.crt')]) expect(log).not.toContain(line);
  });
});
