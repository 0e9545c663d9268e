// QUOTA_HEALTH_ADDR: grpc.health.v1, and only that, in plaintext on a second port,
// for Kubernetes' gRPC probes (which cannot speak TLS) when the main port needs mTLS.
// It reports what the main port reports, from start to the end of the drain.
import { ChannelCredentials, ClientError, createChannel, createClient, Status } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaEngine } from '../../src/engine/engine.js';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { serverTls } from '../../src/grpc/tls.js';
import { createLogger } from '../../src/logger.js';
import { StoreFailurePolicy } from '../../src/engine/failure.js';
import { HangingStore } from '../support/hanging-store.js';
import { shippedPolicies } from '../support/quota-service.js';
import { CLIENT, createTestCertificates, LOOPBACK_SERVER } from '../support/test-certificates.js';

const SERVING = 1;
const NOT_SERVING = 2;

const certificates = createTestCertificates();
beforeAll(() => {
  certificates.authority('ca');
  certificates.issue('server', 'ca', LOOPBACK_SERVER);
  certificates.issue('client', 'ca', CLIENT);
});
afterAll(() => certificates.remove());

const mtls = () => ChannelCredentials.createSsl(certificates.pem('ca.crt'), certificates.pem('client.key'), certificates.pem('client.crt'));

/** The status of `service` at 127.0.0.1:port, or the gRPC code of the failed check. */
async function check(port: number, credentials: ChannelCredentials, service = ''): Promise<number | string> {
  const channel = createChannel(`127.0.0.1:${port}`, credentials);
  try {
    return (await createClient(HealthDefinition, channel).check({ service }, { signal: AbortSignal.timeout(5_000) })).status;
  } catch (error) {
    return error instanceof ClientError ? Status[error.code] : String(error);
  } finally {
    channel.close();
  }
}

describe('the plaintext health-only port beside an mTLS gRPC port', () => {
  let store: HangingStore;
  let server: QuotaServer;
  let healthPort: number;

  beforeAll(async () => {
    store = new HangingStore();
    // A long budget: the call below must still be in flight while the server drains.
    const failure = new StoreFailurePolicy({ timeoutMs: 60_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
    server = await startQuotaServer({
      engine: new QuotaEngine(await shippedPolicies(), store, { failure }),
      address: '127.0.0.1:0',
      logger: createLogger('silent'),
      credentials: serverTls({ cert: certificates.file('server.crt'), key: certificates.file('server.key'), clientCa: certificates.file('ca.crt') })
        .credentials,
      healthAddress: '127.0.0.1:0',
    });
    healthPort = server.healthPort!;
  });
  afterAll(async () => {
    await store.close();
    await server.shutdown(0);
  });

  it('is a port of its own that plaintext probes reach, while the main port refuses plaintext', async () => {
    expect(healthPort).toBeGreaterThan(0);
    expect(healthPort).not.toBe(server.port);
    expect(await check(server.port, ChannelCredentials.createInsecure())).toBe('UNAVAILABLE');
    expect(await check(healthPort, ChannelCredentials.createInsecure())).toBe(NOT_SERVING);
  });

  it('reports what the main port reports, for the server and for quota.v1.QuotaService', async () => {
    for (const serving of [true, false, true]) {
      server.setServing(serving);
      for (const service of ['', QuotaServiceDefinition.fullName]) {
        const expected = serving ? SERVING : NOT_SERVING;
        expect(await check(server.port, mtls(), service)).toBe(expected);
        expect(await check(healthPort, ChannelCredentials.createInsecure(), service)).toBe(expected);
      }
    }
  });

  it('serves nothing but health: the quota API there is UNIMPLEMENTED', async () => {
    const channel = createChannel(`127.0.0.1:${healthPort}`, ChannelCredentials.createInsecure());
    try {
      const quota = createClient(QuotaServiceDefinition, channel);
      await expect(quota.listPolicies({})).rejects.toMatchObject({ code: Status.UNIMPLEMENTED });
    } finally {
      channel.close();
    }
  });

  it('says NOT_SERVING for the whole drain, then closes with the main port', async () => {
    server.setServing(true);
    const channel = createChannel(`127.0.0.1:${server.port}`, mtls());
    const inFlight = createClient(QuotaServiceDefinition, channel)
      .allow({ policy: 'orders', identity: { user: 'u1' }, cost: 1 })
      .catch((error: unknown) => error);
    // The call has reached the store (and hangs there): the drain has something to wait for.
    while (store.asked === 0) await new Promise((resolve) => setImmediate(resolve));
    const stopped = server.shutdown(60_000);
    expect(await check(healthPort, ChannelCredentials.createInsecure())).toBe(NOT_SERVING);
    // Ends the in-flight call, so the drain completes.
    await store.close();
    await stopped;
    await inFlight;
    channel.close();
    expect(await check(healthPort, ChannelCredentials.createInsecure())).toBe('UNAVAILABLE');
  });
});
