import { writeFileSync } from 'node:fs';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, expect } from 'vitest';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { startServiceProcess, untilServing, type ServiceProcess } from './service-process.js';
import { CLIENT, createTestCertificates, type TestCertificates } from './test-certificates.js';

/** Redis presents its certificate to clients and, for tls-replication and tls-cluster, to its peers. */
export const REDIS_NODE = 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n';

/** What a test file of the service talking to Redis over TLS uses (redisTlsFixture). */
export interface RedisTlsFixture {
  readonly certificates: TestCertificates;
  /** The path of a certificate or key file of this run. */
  file(name: string): string;
  /** A TLS-only redis-server (no plain port) with the given certificate, stopped after the file. */
  tlsRedis(options?: { cert?: string; authClients?: boolean }): Promise<RedisServer>;
  /** A service process with these variables, killed after the file if still running. */
  service(env: Record<string, string>): ServiceProcess;
  /** SIGTERM, and a clean exit. */
  stopService(started: ServiceProcess): Promise<void>;
  /** Eleven orders of one user once SERVING: the orders bucket holds 10. */
  elevenOrders(channel: Channel, user: string): Promise<boolean[]>;
  /** The PEM body lines of a file: none of them may ever appear in a log. */
  pemBody(name: string): string[];
  /**
   * A service that cannot verify (or is refused by) its Redis: it logs why,
   * with a hint, stays NOT_SERVING, and orders is answered by its failure
   * mode (local), so nothing was decided on, or even sent to, the server it
   * could not trust. Resolves with the service's whole output.
   */
  expectRefused(redis: RedisServer, env: Record<string, string>, why: { code: RegExp; hint: RegExp }): Promise<string>;
}

/**
 * The service talking to Redis over TLS with a private CA (QUOTA_REDIS_TLS_CA)
 * and a client certificate (QUOTA_REDIS_TLS_CERT/KEY), against real
 * redis-server processes with TLS ports and certificates made by openssl for
 * this run: the certificates are issued before the file's tests, and the
 * services, servers and files removed after them. Call at a test file's top level.
 */
export function redisTlsFixture(): RedisTlsFixture {
  const certificates = createTestCertificates();
  const { file } = certificates;
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

  const service = (env: Record<string, string>): ServiceProcess => {
    const started = startServiceProcess(env);
    services.push(started);
    return started;
  };
  const stopService = async (started: ServiceProcess): Promise<void> => {
    started.signal('SIGTERM');
    expect(await started.exit).toBe(0);
  };

  return {
    certificates,
    file,
    service,
    stopService,
    async tlsRedis(options = {}) {
      const name = options.cert ?? 'redis';
      const server = await startRedisServer({
        tls: { cert: file(`${name}.crt`), key: file(`${name}.key`), ca: file('ca.crt'), authClients: options.authClients ?? false, plainPort: false },
      });
      redisServers.push(server);
      return server;
    },
    async elevenOrders(channel, user) {
      await untilServing(channel);
      const client = createClient(QuotaServiceDefinition, channel);
      const allowed = [];
      for (let i = 0; i < 11; i++) allowed.push((await client.allow({ policy: 'orders', identity: { user } })).allowed);
      return allowed;
    },
    pemBody: (name) =>
      certificates
        .pem(name)
        .toString()
        .split('\n')
        .filter((line) => line.length > 20 && !line.startsWith('-----')),
    async expectRefused(redis, env, why) {
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
    },
  };
}
