// The reference order API as a process (`make run-demo` starts it beside the
// quota service). Settings come from the environment, each with a default:
//   ORDER_API_ADDR             listen host:port             127.0.0.1:8080
//   ORDER_API_QUOTA_ADDR       quota service host:port      127.0.0.1:50051
//   ORDER_API_CREDENTIALS      credentials file             clients/order-api/dev-credentials.yaml
//   ORDER_API_ORDERS_POLICY    order policy (user + tenant)  orders.create
//   ORDER_API_IP_POLICY        unauthenticated IP policy    ip
//   ORDER_API_TRUSTED_PROXIES  comma-separated proxy-addr list whose X-Forwarded-For is believed  (none)
//   ORDER_API_MAX_IN_FLIGHT    orders processed at once     64
//   ORDER_API_ON_UNAVAILABLE   fail_open | fail_closed      fail_closed
//   ORDER_API_DEADLINE_MS      quota call deadline          250
//   ORDER_API_LOG_LEVEL        pino level; debug logs every request  info
import { createQuotaClient } from '@quota-service/client';
import { buildOrderApi } from './app.js';
import { Credentials } from './credentials.js';
import { createOrderApiLogger } from './logger.js';
import { OrderStore } from './order-store.js';

/** The demo's catalogue. */
const DEMO_STOCK = { widget: 1000, gadget: 25 };

async function main(): Promise<void> {
  const env = process.env;
  const logger = createOrderApiLogger(env.ORDER_API_LOG_LEVEL ?? 'info');
  const onUnavailable = env.ORDER_API_ON_UNAVAILABLE ?? 'fail_closed';
  if (onUnavailable !== 'fail_open' && onUnavailable !== 'fail_closed') {
    throw new Error(`ORDER_API_ON_UNAVAILABLE must be fail_open or fail_closed, got "${onUnavailable}"`);
  }
  const [host, port] = splitAddress('ORDER_API_ADDR', env.ORDER_API_ADDR ?? '127.0.0.1:8080');
  const quota = createQuotaClient({
    address: env.ORDER_API_QUOTA_ADDR ?? '127.0.0.1:50051',
    deadlineMs: positiveInteger('ORDER_API_DEADLINE_MS', env.ORDER_API_DEADLINE_MS ?? '250'),
    onUnavailable,
    logger: logger.child({ component: 'quota-client' }),
  });
  const app = buildOrderApi({
    quota,
    credentials: await Credentials.load(env.ORDER_API_CREDENTIALS ?? 'clients/order-api/dev-credentials.yaml'),
    orders: new OrderStore(DEMO_STOCK),
    logger,
    ordersPolicy: env.ORDER_API_ORDERS_POLICY ?? 'orders.create',
    ipPolicy: env.ORDER_API_IP_POLICY ?? 'ip',
    trustedProxies: (env.ORDER_API_TRUSTED_PROXIES ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    maxInFlight: positiveInteger('ORDER_API_MAX_IN_FLIGHT', env.ORDER_API_MAX_IN_FLIGHT ?? '64'),
  });
  await app.listen({ host, port });
  const stop = async () => {
    await app.close();
    await quota.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

function splitAddress(name: string, value: string): [string, number] {
  const at = value.lastIndexOf(':');
  return [value.slice(0, at), positiveInteger(name, value.slice(at + 1))];
}

function positiveInteger(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got "${value}"`);
  return n;
}

main().catch((error: unknown) => {
  process.stderr.write(`order-api: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
