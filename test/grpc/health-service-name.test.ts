// grpc.health.v1.Health with a caller's service name of any size: a bounded
// answer, promptly, and the connection it came on keeps working. An error
// message travels in HTTP/2 trailers; one that repeats a 1 MiB name never
// arrives and stalls every later call on that connection.
import { ClientError, createChannel, createClient, Status, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { QuotaEngine } from '../../src/engine/engine.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { MemoryStore } from '../../src/store/memory.js';
import { shippedPolicies } from '../support/quota-service.js';

const SERVING = 1;
const SERVICE_UNKNOWN = 3;
const MIB = 2 ** 20;

let server: QuotaServer;
beforeAll(async () => {
  server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), new MemoryStore()),
    address: '127.0.0.1:0',
    logger: createLogger('silent'),
    healthAddress: '127.0.0.1:0',
  });
  server.setServing(true);
});
afterAll(() => server?.shutdown(0));

/** The gRPC error of a call, or 'OK'; a call that gets no answer in 5 s fails as DEADLINE_EXCEEDED. */
const outcome = (call: Promise<unknown>) =>
  call.then(
    () => ({ code: 'OK', details: '' }),
    (error: unknown) => (error instanceof ClientError ? { code: Status[error.code], details: error.details } : { code: String(error), details: '' }),
  );
const within5s = () => ({ signal: AbortSignal.timeout(5_000) });

/** Reads a Watch stream's first answer, then ends the stream. */
async function firstWatchAnswer(channel: Channel, service: string) {
  const stream = createClient(HealthDefinition, channel).watch({ service }, within5s());
  for await (const answer of stream) return answer.status;
  return undefined;
}

for (const port of ['main', 'health-only'] as const) {
  describe(`the ${port} port`, () => {
    let channel: Channel;
    beforeAll(() => {
      channel = createChannel(`127.0.0.1:${port === 'main' ? server.port : server.healthPort}`);
    });
    afterAll(() => channel.close());

    it('Check with a 1 MiB service name: INVALID_ARGUMENT at once, a short message, and the connection still answers', async () => {
      const health = createClient(HealthDefinition, channel);
      const started = performance.now();
      const { code, details } = await outcome(health.check({ service: 's'.repeat(MIB) }, within5s()));
      expect(code).toBe('INVALID_ARGUMENT');
      expect(details).toBe(`service: must be at most 256 characters, got ${MIB}`);
      expect(performance.now() - started).toBeLessThan(2_000);
      // The same client, the same HTTP/2 connection.
      expect((await health.check({ service: '' }, within5s())).status).toBe(SERVING);
      expect((await health.check({ service: QuotaServiceDefinition.fullName }, within5s())).status).toBe(SERVING);
    });

    it('Watch with a 1 MiB service name: INVALID_ARGUMENT, and the connection still answers', async () => {
      const { code, details } = await outcome(firstWatchAnswer(channel, 's'.repeat(MIB)));
      expect(code).toBe('INVALID_ARGUMENT');
      expect(details).toBe(`service: must be at most 256 characters, got ${MIB}`);
      expect(await firstWatchAnswer(channel, '')).toBe(SERVING);
    });

    it('an unknown name within the bound: Check says NOT_FOUND quoting at most 64 characters of it, Watch says SERVICE_UNKNOWN', async () => {
      const health = createClient(HealthDefinition, channel);
      expect(await outcome(health.check({ service: 'no.such.Service' }, within5s()))).toEqual({
        code: 'NOT_FOUND',
        details: 'service: no service named "no.such.Service"',
      });
      expect(await outcome(health.check({ service: 'x'.repeat(256) }, within5s()))).toEqual({
        code: 'NOT_FOUND',
        details: `service: no service named "${'x'.repeat(64)}…" (256 characters)`,
      });
      expect(await outcome(health.check({ service: 'x'.repeat(257) }, within5s()))).toEqual({
        code: 'INVALID_ARGUMENT',
        details: 'service: must be at most 256 characters, got 257',
      });
      expect(await firstWatchAnswer(channel, 'no.such.Service')).toBe(SERVICE_UNKNOWN);
    });
  });
}
