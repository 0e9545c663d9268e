import { writeFileSync } from 'node:fs';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../support/service-process.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { limitFrom } from '../support/store-fixtures.js';
import { CLIENT, createTestCertificates } from '../support/test-certificates.js';
import { decideLimit } from '../support/store-calls.js';

/**
 * The service talking to Redis over TLS with a private CA (QUOTA_REDIS_TLS_CA) and a
 * client certificate (QUOTA_REDIS_TLS_CERT/KEY), against real redis-server processes
 * with TLS ports and certificates made by openssl for this run.
 */
const certificates = createTestCertificates();
const { file } = certificates;
// Redis presents its certificate to clients and, for tls-replication and tls-cluster, to its peers.
const REDIS_NODE = 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n';

const services: ServiceProcess[] = [];
const redisServers: RedisServer[] = [];
beforeAll(() => {
  certificates.authority('ca');
  certificates.authority('other-ca');
  certificates.issue('redis', 'ca', REDIS_NODE);
  // Signed by the right CA, but for another name only: must not be accepted for 127.0.0.1.
  certificates.issue('redis-localhost-only', 'ca', 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  certificates.issue('client', 'ca', CLIENT);
  certificates.issue('stranger', 'other-ca', CLIENT);
  // A client certificate renewed under another CA: Redis trusts it only once told to.
  certificates.issue('renewed-client', 'other-ca', CLIENT);
  // Redis's certificate renewed under another CA, and a bundle trusting both CAs.
  certificates.issue('redis-next', 'other-ca', REDIS_NODE);
  writeFileSync(file('both-cas.crt'), Buffer.concat([certificates.pem('ca.crt'), certificates.pem('other-ca.crt')]));
});
afterAll(async () => {
  for (const service of services) service.signal('SIGKILL');
  await Promise.all(redisServers.map((server) => server.stop()));
  certificates.remove();
});

/** A TLS-only redis-server (no plain port) with the given certificate, stopped after the file. */
async function tlsRedis(options: { cert?: string; authClients?: boolean } = {}): Promise<RedisServer> {
  const name = options.cert ?? 'redis';
  const server = await startRedisServer({
    tls: { cert: file(`${name}.crt`), key: file(`${name}.key`), ca: file('ca.crt'), authClients: options.authClients ?? false, plainPort: false },
  });
  redisServers.push(server);
  return server;
}

function service(env: Record<string, string>): ServiceProcess {
  const started = startServiceProcess(env);
  services.push(started);
  return started;
}

async function stopService(started: ServiceProcess): Promise<void> {
  started.signal('SIGTERM');
  expect(await started.exit).toBe(0);
}

/** Eleven orders of one user once SERVING: the orders bucket holds 10. */
async function elevenOrders(channel: Channel, user: string): Promise<boolean[]> {
  await untilServing(channel);
  const client = createClient(QuotaServiceDefinition, channel);
  const allowed = [];
  for (let i = 0; i < 11; i++) allowed.push((await client.allow({ policy: 'orders', identity: { user } })).allowed);
  return allowed;
}

/** The PEM body lines of a file: none of them may ever appear in a log. */
const pemBody = (name: string) =>
  certificates
    .pem(name)
    .toString()
    .split('\n')
    .filter((line) => line.length > 20 && !line.startsWith('-----'));

/**
 * A service that cannot verify (or is refused by) its Redis: it logs why, with a hint,
 * stays NOT_SERVING, and orders is answered by its failure mode (local), so nothing
 * was decided on, or even sent to, the server it could not trust.
 */
async function expectRefused(redis: RedisServer, env: Record<string, string>, why: { code: RegExp; hint: RegExp }): Promise<string> {
  const refused = service({ QUOTA_REDIS_URL: redis.url, ...env });
  const line = await refused.logged(/"msg":"cannot connect to Redis: health stays NOT_SERVING"/);
  expect(line).toMatch(/"level":50,/);
  expect(line).toContain(`"node":"127.0.0.1:${redis.port}"`);
  expect(line).toMatch(why.code);
  expect(line).toMatch(why.hint);
  const channel = createChannel(`127.0.0.1:${await refused.port}`);
  try {
    expect((await createClient(HealthDefinition, channel).check({ service: '' })).status).toBe(2); // NOT_SERVING
    const response = await createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'refused' } });
    expect(response.source).toBe(DecisionSource.DECISION_SOURCE_LOCAL);
  } finally {
    channel.close();
  }
  expect(await redis.client().dbsize()).toBe(0);
  await stopService(refused);
  const { stdout, stderr } = refused.output();
  return stdout + stderr;
}

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

describe('a 3+3 Redis Cluster over TLS (tls-cluster, tls-replication, tls-auth-clients yes)', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ tls: { cert: file('redis.crt'), key: file('redis.key'), ca: file('ca.crt'), authClients: true } });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('rediss:// seeds: decisions on every master, each key on the master that owns its slot', async () => {
    // Seeds are one master and one replica: the client learns the other masters' TLS ports from CLUSTER SLOTS.
    const seeds = [cluster.tlsSeeds[0]!, cluster.tlsSeeds[5]!];
    const started = service({
      QUOTA_REDIS_CLUSTER: seeds.join(','),
      QUOTA_REDIS_TLS_CA: file('ca.crt'),
      QUOTA_REDIS_TLS_CERT: file('client.crt'),
      QUOTA_REDIS_TLS_KEY: file('client.key'),
    });
    const channel = createChannel(`127.0.0.1:${await started.port}`);
    const owners = new Set<number>();
    try {
      for (const user of ['a', 'b', 'c']) {
        owners.add(await cluster.ownerOf(`{${user}}`));
        expect(await elevenOrders(channel, user)).toEqual([...Array(10).fill(true), false]);
      }
    } finally {
      channel.close();
    }
    expect(owners.size).toBe(3);
    // Checked over the harness's plain admin connections: one key per user, on its slot's master.
    for (const user of ['a', 'b', 'c']) expect(await cluster.node(await cluster.ownerOf(`{${user}}`)).exists(`rl:v1:orders:user:{${user}}`)).toBe(1);
    const masters = (await cluster.topology()).shards.map((shard) => shard.masterPort);
    expect((await Promise.all(masters.map((port) => cluster.node(port).dbsize()))).reduce((a, b) => a + b, 0)).toBe(3);
    await stopService(started);
    expect(started.output().stdout).toContain(
      `"store":"redis cluster seeds ${seeds.map((seed) => seed.slice('rediss://'.length)).join(',')}","msg":"deciding in Redis"`,
    );
  });

  it('the cluster client verifies every node: with a wrong CA it never connects, and says why for each seed', async () => {
    const seeds = cluster.tlsSeeds.slice(0, 2);
    const reasons = new Map<string, string>();
    let store: RedisStore | undefined;
    await new Promise<void>((resolve) => {
      store = RedisStore.connectCluster(seeds, {
        tls: { ca: certificates.pem('other-ca.crt'), cert: certificates.pem('client.crt'), key: certificates.pem('client.key') },
        onConnectionError: (error, node) => {
          reasons.set(node, (error as NodeJS.ErrnoException).code ?? error.message);
          if (reasons.size === seeds.length) resolve();
        },
      });
    });
    await store!.close();
    expect(Object.fromEntries(reasons)).toEqual(Object.fromEntries(seeds.map((seed) => [seed.slice('rediss://'.length), 'SELF_SIGNED_CERT_IN_CHAIN'])));
  });

  it("the TLS options RedisStore was given, changed in place (a reload), apply from each node's next connection", async () => {
    const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
    const live = { ca: certificates.pem('ca.crt'), cert: certificates.pem('client.crt'), key: certificates.pem('client.key') };
    const store = RedisStore.connectCluster(cluster.tlsSeeds.slice(0, 2), { tls: live });
    // {a}, {b}, {c}: one key on each master (the first test of this block checks that).
    const decideOnEveryMaster = () => Promise.all(['a', 'b', 'c'].map((user) => decideLimit(store, bucket, identityKey('bucket', 'user', user), 1)));
    const admins = cluster.nodes.map((node) => ({ node, admin: cluster.node(node.port) }));
    const useServerCertificate = (name: string, ca: string) =>
      Promise.all(
        admins.map(({ admin }) =>
          admin.call('CONFIG', 'SET', 'tls-ca-cert-file', file(ca), 'tls-cert-file', file(`${name}.crt`), 'tls-key-file', file(`${name}.key`)),
        ),
      );
    try {
      await store.ready();
      await decideOnEveryMaster();
      // Every node now serves a certificate from the other CA (and, for its peers, trusts both),
      // which the loaded CA cannot verify; then the store's connections (to the TLS ports) drop.
      await useServerCertificate('redis-next', 'both-cas.crt');
      Object.assign(live, { ca: certificates.pem('both-cas.crt') });
      for (const { node, admin } of admins) {
        const list = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'normal'));
        const ids = [...list.matchAll(new RegExp(`^id=(\\d+) .*laddr=127\\.0\\.0\\.1:${node.tlsPort} `, 'gm'))].map((match) => match[1] as string);
        if (ids.length > 0) await admin.call('CLIENT', 'KILL', 'ID', ...ids);
      }
      const deadline = Date.now() + 15_000;
      let outcome = await decideOnEveryMaster().catch((error: unknown) => error);
      while (!Array.isArray(outcome) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        outcome = await decideOnEveryMaster().catch((error: unknown) => error);
      }
      expect(Array.isArray(outcome) ? 'decided' : String(outcome)).toBe('decided');
    } finally {
      await store.close();
      await useServerCertificate('redis', 'ca.crt');
    }
  });
});
