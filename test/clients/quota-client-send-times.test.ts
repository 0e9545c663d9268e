import { createServer, type Server } from 'nice-grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient, type QuotaClientOptions } from '@quota-service/client';
import { QuotaServiceDefinition, type AllowRequest } from '@quota-service/contract';
import { quotaService } from '../../src/api/quota/quota-service.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createLogger } from '../../src/logger.js';
import { shippedPolicies } from '../support/quota-service.js';
import { memoryFixture } from '../support/store-fixtures.js';

/**
 * Every request the quota client sends says how long its caller still waits
 * and when it left (deadline_ms, sent_at_unix_ms), whichever rpc carries it,
 * so the service can refuse one that arrives after its caller gave up.
 */
describe('the quota client stamps each request with its caller’s deadline and its send time', () => {
  let server: Server | undefined;
  let client: QuotaClient | undefined;
  afterEach(async () => {
    await client?.close();
    await server?.shutdown();
  });

  /** The real service on a memory store, recording the requests of every Allow, AllowBatch and AllowStream message. */
  async function serve(): Promise<{ port: number; seen: AllowRequest[] }> {
    const seen: AllowRequest[] = [];
    const real = quotaService(new QuotaEngine(await shippedPolicies(), memoryFixture().store), createLogger('silent'), new AbortController().signal);
    server = createServer();
    server.add(QuotaServiceDefinition, {
      ...real,
      allow: (request, context) => (seen.push(request), real.allow(request, context)),
      allowBatch: (request, context) => (seen.push(...request.requests), real.allowBatch(request, context)),
      allowStream: (requests, context) =>
        real.allowStream(
          (async function* () {
            for await (const batch of requests) {
              seen.push(...batch.requests);
              yield batch;
            }
          })(),
          context,
        ),
    });
    return { port: await server.listen('127.0.0.1:0'), seen };
  }

  const clock = () => performance.timeOrigin + performance.now();

  it.each([
    ['AllowStream messages', {}],
    ['AllowBatch calls', { stream: false }],
    ['Allow calls', { batch: false }],
  ] as const)('%s', async (_name, mode: Partial<QuotaClientOptions>) => {
    const { port, seen } = await serve();
    client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 3_000, ...mode });
    const before = clock();
    const decisions = await Promise.all([
      client.allow({ policy: 'orders', identity: { user: 'a' } }),
      client.allow({ policy: 'orders', identity: { user: 'b' } }),
      client.allow({ policy: 'orders', identity: { user: 'c' } }, { deadlineMs: 9_000 }),
    ]);
    const after = clock();
    expect(decisions.map((d) => d.source)).toEqual(['store', 'store', 'store']);
    expect(seen.map((r) => r.identity.user)).toEqual(['a', 'b', 'c']);
    // What is left of each caller's own deadline when the request leaves: no more, and at most the time since the call was made less.
    const elapsed = after - before;
    for (const [request, deadlineMs] of [
      [seen[0]!, 3_000],
      [seen[1]!, 3_000],
      [seen[2]!, 9_000],
    ] as const) {
      expect(request.deadlineMs).toBeLessThanOrEqual(deadlineMs);
      expect(request.deadlineMs).toBeGreaterThanOrEqual(Math.floor(deadlineMs - elapsed));
      expect(request.sentAtUnixMs).toBeGreaterThanOrEqual(before);
      expect(request.sentAtUnixMs).toBeLessThanOrEqual(after);
    }
  });
});
