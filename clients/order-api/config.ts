// The reference order API's settings, from the environment, each with a default:
//   ORDER_API_ADDR             listen host:port             127.0.0.1:8080
//   ORDER_API_QUOTA_ADDR       quota service host:port      127.0.0.1:50051
//   ORDER_API_CREDENTIALS      credentials file             clients/order-api/dev-credentials.yaml
//   ORDER_API_ORDERS_POLICY    order policy (user + tenant)  orders.create
//   ORDER_API_IP_POLICY        unauthenticated IP policy    ip
//   ORDER_API_TRUSTED_PROXIES  comma-separated proxy-addr list whose X-Forwarded-For is believed  (none)
//   ORDER_API_IN_FLIGHT_POLICY orders in progress per tenant, across replicas  orders.in-flight
//   ORDER_API_USER_IN_FLIGHT_POLICY  each user's share of them, taken first  orders.in-flight.user
//   ORDER_API_PIPELINE_LIMIT   requests of one connection in progress at once  4
//   ORDER_API_ON_UNAVAILABLE   fail_open | fail_closed (rate limits and the in-flight lease)  fail_closed
//   ORDER_API_DEADLINE_MS      quota call deadline          250
//   ORDER_API_LOG_LEVEL        pino level; debug logs every request  info
// Only ORDER_API_* names: the quota service's QUOTA_* variables may be set in the
// same shell, and the service warns about QUOTA_* names it does not know.

export interface OrderApiConfig {
  host: string;
  port: number;
  quotaAddress: string;
  credentialsFile: string;
  ordersPolicy: string;
  ipPolicy: string;
  trustedProxies: string[];
  inFlightPolicy: string;
  userInFlightPolicy: string;
  pipelineLimit: number;
  onUnavailable: 'fail_open' | 'fail_closed';
  deadlineMs: number;
  logLevel: string;
}

/** Reads the ORDER_API_* variables (and no other); a bad value fails with its name. */
export function loadOrderApiConfig(env: NodeJS.ProcessEnv): OrderApiConfig {
  const onUnavailable = env.ORDER_API_ON_UNAVAILABLE ?? 'fail_closed';
  if (onUnavailable !== 'fail_open' && onUnavailable !== 'fail_closed') {
    throw new Error(`ORDER_API_ON_UNAVAILABLE must be fail_open or fail_closed, got "${onUnavailable}"`);
  }
  const [host, port] = splitAddress('ORDER_API_ADDR', env.ORDER_API_ADDR ?? '127.0.0.1:8080');
  return {
    host,
    port,
    quotaAddress: env.ORDER_API_QUOTA_ADDR ?? '127.0.0.1:50051',
    credentialsFile: env.ORDER_API_CREDENTIALS ?? 'clients/order-api/dev-credentials.yaml',
    ordersPolicy: env.ORDER_API_ORDERS_POLICY ?? 'orders.create',
    ipPolicy: env.ORDER_API_IP_POLICY ?? 'ip',
    trustedProxies: (env.ORDER_API_TRUSTED_PROXIES ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    inFlightPolicy: env.ORDER_API_IN_FLIGHT_POLICY ?? 'orders.in-flight',
    userInFlightPolicy: env.ORDER_API_USER_IN_FLIGHT_POLICY ?? 'orders.in-flight.user',
    pipelineLimit: positiveInteger('ORDER_API_PIPELINE_LIMIT', env.ORDER_API_PIPELINE_LIMIT ?? '4'),
    onUnavailable,
    deadlineMs: positiveInteger('ORDER_API_DEADLINE_MS', env.ORDER_API_DEADLINE_MS ?? '250'),
    logLevel: env.ORDER_API_LOG_LEVEL ?? 'info',
  };
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
