import { Writable } from 'node:stream';
import { ChannelCredentials } from '@grpc/grpc-js';
import { type ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCallers, tokenSha256 } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { policiesNamedIn } from '../../src/grpc/auth-middleware.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { serverTls } from '../../src/grpc/tls.js';
import { createLogger } from '../../src/logger.js';
import { MemoryStore } from '../../src/store/memory.js';
import { openAllowStream } from '../support/allow-stream-probe.js';
import { shippedPolicies } from '../support/quota-service.js';
import { CLIENT, createTestCertificates, LOOPBACK_SERVER } from '../support/test-certificates.js';
import { bearer, codeOf } from '../support/grpc-calls.js';

const ORDER_API_TOKEN = 'order-api-token-7f3a9c1e5b2d4f60';
const GATEWAY_TOKEN = 'gateway-token-0c9e8d7b6a5f4e3d2c1b';
const CALLERS = `
callers:
  order-api:
    token: ${ORDER_API_TOKEN}
    policies: [orders]
  gateway:
    token_sha256: ${tokenSha256(GATEWAY_TOKEN)}
    policies: ['*']
`;

async function serve(options: { tls?: Parameters<typeof serverTls>[0]; callers?: string; lines?: string[] }): Promise<QuotaServer> {
  const lines = options.lines ?? [];
  const logger = createLogger('trace', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  const server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), new MemoryStore()),
    address: '127.0.0.1:0',
    logger,
    credentials: options.tls ? serverTls(options.tls).credentials : undefined,
    callers: options.callers === undefined ? undefined : parseCallers(options.callers),
  });
  server.setServing(true);
  return server;
}

describe('bearer tokens per calling service', () => {
  let server: QuotaServer;
  let channel: Channel;
  const lines: string[] = [];
  beforeAll(async () => {
    server = await serve({ callers: CALLERS, lines });
    channel = createChannel(`127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    channel.close();
    await server.shutdown(1_000);
  });

  it("no token or a wrong one: UNAUTHENTICATED; a policy outside the caller's set: PERMISSION_DENIED; a valid one: decided", async () => {
    const client = createClient(QuotaServiceDefinition, channel);
    const orders = { policy: 'orders', identity: { user: 'auth' } };
    expect(await codeOf(client.allow(orders))).toBe('UNAUTHENTICATED');
    expect(await codeOf(client.allow(orders, bearer('not-a-known-token-at-all')))).toBe('UNAUTHENTICATED');
    expect(await codeOf(client.allow(orders, { metadata: Metadata({ authorization: ORDER_API_TOKEN }) }))).toBe('UNAUTHENTICATED'); // no "Bearer"
    expect(await codeOf(client.allow({ policy: 'user', identity: { user: 'auth' } }, bearer(ORDER_API_TOKEN)))).toBe('PERMISSION_DENIED');
    expect(await codeOf(client.listPolicies({}))).toBe('UNAUTHENTICATED');

    expect((await client.allow({ ...orders, requestId: 'req-1' }, bearer(ORDER_API_TOKEN))).allowed).toBe(true);
    // The gateway's file entry holds only the token's hash, and it may use every policy.
    expect((await client.allow({ policy: 'user', identity: { user: 'auth' } }, bearer(GATEWAY_TOKEN))).allowed).toBe(true);
    // ListPolicies shows a caller the policies it may use, and only those.
    const names = async (token: string) => (await client.listPolicies({}, bearer(token))).policies.map((p) => p.name).sort();
    expect(await names(ORDER_API_TOKEN)).toEqual(['orders']);
    expect(await names(GATEWAY_TOKEN)).toEqual([...(await shippedPolicies()).keys()].sort());

    const denied = await client.allow({ policy: 'tenant', identity: { tenant: 't' } }, bearer(ORDER_API_TOKEN)).catch((e: ClientError) => e);
    expect((denied as ClientError).details).toBe('caller "order-api" may not use policy "tenant"');
  });

  it("a policy name of 1 MiB outside the caller's set: PERMISSION_DENIED quoting 64 characters of it, and the connection keeps serving", async () => {
    const client = createClient(QuotaServiceDefinition, channel);
    const huge = 'p'.repeat(2 ** 20);
    const denied = await client
      .allow({ policy: huge, identity: { user: 'auth' } }, { ...bearer(ORDER_API_TOKEN), signal: AbortSignal.timeout(5_000) })
      .catch((e: ClientError) => e);
    expect((denied as ClientError).code).toBe(Status.PERMISSION_DENIED);
    expect((denied as ClientError).details).toBe(`caller "order-api" may not use policy "${'p'.repeat(64)}…" (1048576 characters)`);
    expect((await client.allow({ policy: 'orders', identity: { user: 'after-huge' } }, bearer(ORDER_API_TOKEN))).allowed).toBe(true);
  });

  it('health and reflection stay reachable without a token (probes, grpcurl)', async () => {
    expect((await createClient(HealthDefinition, channel).check({ service: '' })).status).toBe(1);
  });

  it('an AllowStream is logged once, with the caller and no token', async () => {
    const stream = openAllowStream(createClient(QuotaServiceDefinition, channel), bearer(ORDER_API_TOKEN));
    stream.send(1, [{ policy: 'orders', identity: { user: 'streamer' }, cost: 0, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }]);
    expect((await stream.answer(1)).results[0]!.response?.allowed).toBe(true);
    stream.end();
    expect(await stream.ended).toBe('OK');
    expect(lines.some((l) => /"method":"\/quota.v1.QuotaService\/AllowStream".*"caller":"order-api".*"msg":"call finished"/.test(l))).toBe(true);
    expect(lines.join('')).not.toContain('streamer');
  });

  it('tokens never reach the logs, at the most verbose level', () => {
    const log = lines.join('');
    expect(log).toContain('"msg":"call started"');
    // Each call's lines carry the policy id, the request id and the caller's name, never the identity values.
    expect(lines.some((l) => /"policy":"orders".*"requestId":"req-1".*"caller":"order-api".*"msg":"call finished"/.test(l))).toBe(true);
    expect(log).not.toContain('"user":"auth"');
    expect(log).not.toContain(ORDER_API_TOKEN);
    expect(log).not.toContain(GATEWAY_TOKEN);
    expect(log).not.toContain('not-a-known-token-at-all');
  });

  it('every policy a request names is checked, including repeated items (AllowBatch)', () => {
    expect(policiesNamedIn({ policy: 'a', identity: { policy: 'not-a-policy' } })).toEqual(['a']);
    expect(policiesNamedIn({ requests: [{ policy: 'a' }, { policy: 'b', identity: {} }] })).toEqual(['a', 'b']);
    expect(policiesNamedIn({})).toEqual([]);
  });

  it('a bad callers file names the caller by position, line and name hash, the field, and never echoes a token', () => {
    expect(() => parseCallers('callers:\n  x:\n    token: short\n    policies: [orders]\n')).toThrow(
      'the 1st caller (line 2, name sha256 2d711642): token: must be at least 16 characters',
    );
    expect(() => parseCallers('callers:\n  x:\n    policies: [orders]\n')).toThrow(
      'the 1st caller (line 2, name sha256 2d711642): token: give exactly one of token, token_sha256',
    );
    const duplicate = `callers:\n  a: { token: ${ORDER_API_TOKEN}, policies: [x] }\n  b: { token: ${ORDER_API_TOKEN}, policies: [y] }\n`;
    expect(() => parseCallers(duplicate)).toThrow(
      'the 2nd caller (line 3, name sha256 3e23e816) has the same token as the 1st caller (line 2, name sha256 ca978112)',
    );
    try {
      parseCallers(duplicate);
    } catch (error) {
      expect((error as Error).message).not.toContain(ORDER_API_TOKEN);
    }
  });
});

describe('TLS and mutual TLS on the gRPC port (certificates generated by openssl)', () => {
  const certificates = createTestCertificates();
  const { file, pem } = certificates;

  beforeAll(() => {
    for (const ca of ['ca', 'other-ca']) certificates.authority(ca);
    certificates.issue('server', 'ca', LOOPBACK_SERVER);
    certificates.issue('client', 'ca', CLIENT);
    certificates.issue('stranger', 'other-ca', CLIENT);
  });
  afterAll(() => certificates.remove());

  /** Health, and an Allow (read off its HTTP/2 stream by the lean path): both answer on one connection, or neither. */
  const health = async (port: number, credentials: ChannelCredentials) => {
    const channel = createChannel(`127.0.0.1:${port}`, credentials);
    const signal = () => AbortSignal.timeout(5_000);
    try {
      const checked = await codeOf(createClient(HealthDefinition, channel).check({ service: '' }, { signal: signal() }));
      const allowed = await codeOf(createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'tls' } }, { signal: signal() }));
      expect(allowed).toBe(checked);
      return checked;
    } finally {
      channel.close();
    }
  };

  it('TLS: a client trusting the CA connects; a plaintext client does not', async () => {
    const server = await serve({ tls: { cert: file('server.crt'), key: file('server.key') } });
    try {
      expect(await health(server.port, ChannelCredentials.createSsl(pem('ca.crt')))).toBe('OK');
      expect(await health(server.port, ChannelCredentials.createInsecure())).toBe('UNAVAILABLE');
    } finally {
      await server.shutdown(1_000);
    }
  });

  it('mTLS: only a client certificate signed by the client CA gets in', async () => {
    const server = await serve({ tls: { cert: file('server.crt'), key: file('server.key'), clientCa: file('ca.crt') } });
    try {
      expect(await health(server.port, ChannelCredentials.createSsl(pem('ca.crt'), pem('client.key'), pem('client.crt')))).toBe('OK');
      expect(await health(server.port, ChannelCredentials.createSsl(pem('ca.crt')))).toBe('UNAVAILABLE');
      expect(await health(server.port, ChannelCredentials.createSsl(pem('ca.crt'), pem('stranger.key'), pem('stranger.crt')))).toBe('UNAVAILABLE');
    } finally {
      await server.shutdown(1_000);
    }
  });

  it('bad TLS settings name the variable', () => {
    expect(() => serverTls({ cert: file('server.crt') })).toThrow(/QUOTA_TLS_KEY: required with QUOTA_TLS_CERT/);
    expect(() => serverTls({ clientCa: file('ca.crt') })).toThrow(/QUOTA_TLS_CLIENT_CA: needs QUOTA_TLS_CERT and QUOTA_TLS_KEY/);
    expect(() => serverTls({ cert: '/nonexistent.crt', key: file('server.key') })).toThrow(/QUOTA_TLS_CERT: cannot read \/nonexistent\.crt/);
  });
});
