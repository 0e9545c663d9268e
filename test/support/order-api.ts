import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { QuotaClient } from '@quota-service/client';
import { buildOrderApi, type OrderApiOptions } from '../../clients/order-api/app.js';
import { Credentials } from '../../clients/order-api/credentials.js';
import { createOrderApiLogger } from '../../clients/order-api/logger.js';
import { OrderStore } from '../../clients/order-api/order-store.js';

/** The development credentials (clients/order-api/dev-credentials.yaml). */
export const CREDENTIALS = 'clients/order-api/dev-credentials.yaml';
export const ALICE = { authorization: 'Bearer dev-token-alice' };
export const BOB = { authorization: 'Bearer dev-token-bob' };
export const API_KEY = { 'x-api-key': 'dev-key-acme-integration' };

/** The reference order API on 127.0.0.1:<free>, its log lines captured in memory. */
export interface RunningApi {
  url: string;
  orders: OrderStore;
  /** Every log line written, as the JSON text pino wrote. */
  logs: string[];
  app: FastifyInstance;
}

export async function startOrderApi(
  quota: QuotaClient,
  extra: Partial<OrderApiOptions> = {},
  orders = new OrderStore({ widget: 1000, gadget: 3 }),
  level = 'debug',
): Promise<RunningApi> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  const app = buildOrderApi({
    quota,
    credentials: await Credentials.load(CREDENTIALS),
    orders,
    logger: createOrderApiLogger(level, sink),
    ...extra,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, orders, logs, app };
}

/** POST /api/orders with a JSON body (default: one widget). */
export const post = (api: RunningApi, headers: Record<string, string>, body: unknown = { sku: 'widget', quantity: 1 }) =>
  fetch(`${api.url}/api/orders`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
