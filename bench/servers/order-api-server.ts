// Child process: the reference order API (clients/order-api) for the order API
// bench. argv: <quota port> <limited|unbatched|unlimited>. "unlimited" is the baseline:
// the same app with a quota client that allows at once without asking anyone,
// so the difference between the two is what the limiter adds to a request;
// "unbatched" is "limited" with the quota client's batching off (one Allow per call).
import { buildOrderApi } from '../../clients/order-api/app.js';
import { Credentials } from '../../clients/order-api/credentials.js';
import { createOrderApiLogger } from '../../clients/order-api/logger.js';
import { OrderStore } from '../../clients/order-api/order-store.js';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { failStart, serveUntilParentLeaves } from './lifecycle.js';

const noLimiter: QuotaClient = {
  async allow() {
    return { allowed: true, retryAfterMs: 0, deniedBy: '', limits: [], delayMs: 0, source: 'store' };
  },
  async reserve() {
    throw new Error('the unlimited baseline reserves nothing');
  },
  async listPolicies() {
    return [];
  },
  async acquire() {
    throw new Error('the unlimited baseline holds no leases (the bench runs without the in-flight cap)');
  },
  async close() {},
};

async function main(): Promise<void> {
  const [quotaPort, mode] = process.argv.slice(2);
  if (quotaPort === undefined || (mode !== 'limited' && mode !== 'calls' && mode !== 'unbatched' && mode !== 'unlimited')) {
    throw new Error('usage: order-api-server.ts <quota port> limited|calls|unbatched|unlimited');
  }
  // limited: the client's defaults (batches on one AllowStream); calls: a gRPC call per batch; unbatched: an Allow per request.
  const modeOptions = mode === 'unbatched' ? { batch: false as const } : mode === 'calls' ? { stream: false } : {};
  const quota = mode === 'unlimited' ? noLimiter : createQuotaClient({ address: `127.0.0.1:${quotaPort}`, deadlineMs: 5_000, ...modeOptions });
  const app = buildOrderApi({
    quota,
    credentials: await Credentials.load('clients/order-api/dev-credentials.yaml'),
    // Stock that never runs out: every request is a created order.
    orders: new OrderStore({ widget: Number.MAX_SAFE_INTEGER }),
    logger: createOrderApiLogger('silent'),
    // The bench policy of quota-server.ts: a bucket per user that never runs dry.
    ordersPolicy: 'bench',
    // The bench policy file has no in-flight policy: the bench measures the rate limiter's path.
    inFlightPolicy: false,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  serveUntilParentLeaves(address.port, async () => {
    await app.close();
    await quota.close();
  });
}

main().catch(failStart);
