// The reference order API as a process (`make run-demo` starts it beside the
// quota service). Its settings: config.ts.
import { createQuotaClient } from '@quota-service/client';
import { buildOrderApi } from './app.js';
import { loadOrderApiConfig } from './config.js';
import { Credentials } from './credentials.js';
import { createOrderApiLogger } from './logger.js';
import { OrderStore } from './order-store.js';

/** The demo's catalogue. */
const DEMO_STOCK = { widget: 1000, gadget: 25 };

/** A failed bind in words, naming the cause the operator can act on. */
const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'address in use (another process listens there)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'no network interface of this machine has that address',
};

async function main(): Promise<void> {
  const config = loadOrderApiConfig(process.env);
  const logger = createOrderApiLogger(config.logLevel);
  const quota = createQuotaClient({
    address: config.quotaAddress,
    deadlineMs: config.deadlineMs,
    onUnavailable: config.onUnavailable,
    // The operator's one choice applies to the in-flight lease too (the client's default for leases is fail_closed).
    leaseOnUnavailable: config.onUnavailable,
    logger: logger.child({ component: 'quota-client' }),
  });
  const app = buildOrderApi({
    quota,
    credentials: await Credentials.load(config.credentialsFile),
    orders: new OrderStore(DEMO_STOCK),
    logger,
    ordersPolicy: config.ordersPolicy,
    ipPolicy: config.ipPolicy,
    trustedProxies: config.trustedProxies,
    inFlightPolicy: config.inFlightPolicy,
    userInFlightPolicy: config.userInFlightPolicy,
    pipelineLimit: config.pipelineLimit,
  });
  await app.listen({ host: config.host, port: config.port }).catch((error: NodeJS.ErrnoException) => {
    throw new Error(`ORDER_API_ADDR: cannot listen on ${config.host}:${config.port}: ${LISTEN_ERRORS[error.code ?? ''] ?? error.message}`);
  });
  const stop = async () => {
    await app.close();
    await quota.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

main().catch((error: unknown) => {
  process.stderr.write(`order-api: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
