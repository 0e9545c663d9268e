import { createHash } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { clientIpResolver } from '@quota-service/http';
import { fastifyRateLimit } from '@quota-service/http/fastify';
import type { QuotaClient } from '@quota-service/client';
import type { Authentication, Credentials, Principal } from './credentials.js';
import { errorReply, notFound } from './error-replies.js';
import { IdempotencyStore } from './idempotency.js';
import { type InFlightLease, inFlightLease } from './in-flight-lease.js';
import type { OrderStore } from './order-store.js';
import { OrderApiLogController } from './request-logging.js';
import { requestsPerConnection } from './requests-per-connection.js';

export interface OrderApiOptions {
  quota: QuotaClient;
  credentials: Credentials;
  orders: OrderStore;
  logger: Logger;
  /** Policy of the per-user order limit. Default "orders" (becomes "orders.create" with multi-limit policies). */
  ordersPolicy?: string;
  /** Policy of the IP limit for unauthenticated traffic. Default "ip" (30/min in config/policies.yaml). */
  ipPolicy?: string;
  /** Proxies whose X-Forwarded-For is believed (proxy-addr syntax). Default none. */
  trustedProxies?: string[];
  /**
   * Policy of the cap on orders in progress per tenant, across every replica (a
   * `concurrency` limit): each order holds a lease until its answer is ready or
   * its connection closes; over the cap: 429. Default "orders.in-flight"; false: no cap.
   */
  inFlightPolicy?: string | false;
  /**
   * Policy of each user's share of that cap (a `concurrency` limit keyed by
   * user), taken before the tenant's: a user over their share takes none of
   * the tenant's places. Default "orders.in-flight.user" (none when
   * inFlightPolicy is false); false: no share.
   */
  userInFlightPolicy?: string | false;
  /** Requests of one connection in progress at once (HTTP pipelining); beyond: 429. Default 4. */
  pipelineLimit?: number;
}

/** Per-request state of the layers, kept off the request object's type. */
interface RequestState {
  auth: Authentication;
  principal?: Principal;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * The reference order service: POST /api/orders, its layers in this order:
 * requests in progress per connection -> edge (IP limit for unauthenticated
 * traffic) -> authentication -> orders in flight per user, then per tenant
 * (leases held until the answer is ready) -> application limiter (per user) ->
 * business logic (validation, stock check, order creation, Idempotency-Key).
 * GET /api/orders/:id (the 201's Location) goes through the same edge and
 * authentication; reading an order spends nothing of the order limit.
 */
export function buildOrderApi(options: OrderApiOptions): FastifyInstance {
  // pino's Logger is a FastifyBaseLogger; the cast keeps the instance's default type parameters.
  const app = Fastify({ loggerInstance: options.logger as FastifyBaseLogger, logController: new OrderApiLogController() });
  // 0. Pipelined requests: a connection's requests beyond a few in progress are
  //    refused before anything runs (every route, unknown paths included).
  app.addHook('onRequest', requestsPerConnection(options.pipelineLimit ?? 4));
  app.setNotFoundHandler(notFound);
  app.setErrorHandler(errorReply);
  const clientIp = clientIpResolver(options.trustedProxies ?? []);
  const state = new WeakMap<FastifyRequest, RequestState>();
  const stateOf = (request: FastifyRequest) => state.get(request) as RequestState;
  const idempotency = new IdempotencyStore();
  const ordersPolicy = options.ordersPolicy ?? 'orders.create';
  const inFlightPolicy = options.inFlightPolicy ?? 'orders.in-flight';
  const userInFlightPolicy = options.userInFlightPolicy ?? (inFlightPolicy === false ? false : 'orders.in-flight.user');

  // 1. Edge: read the credentials (cheap, no business state) and count
  //    requests that do not authenticate against their client IP.
  const ipLimit = fastifyRateLimit({
    client: options.quota,
    policy: options.ipPolicy ?? 'ip',
    identify: (request) => (stateOf(request).auth.kind === 'ok' ? undefined : { ip: clientIp(request.raw) }),
  });
  // 2. Authentication: 401 unless the credentials resolve to a principal.
  const authenticate = async (request: FastifyRequest, reply: FastifyReply) => {
    const { auth } = stateOf(request);
    if (auth.kind === 'ok') {
      stateOf(request).principal = auth.principal;
      return;
    }
    // The kind of failure, never the credential.
    request.log.info({ auth: auth.kind, scheme: auth.kind === 'invalid' ? auth.scheme : undefined }, 'unauthenticated request');
    return reply
      .code(401)
      .header('WWW-Authenticate', 'Bearer')
      .send({ error: 'unauthenticated', message: 'Send Authorization: Bearer <token> or X-API-Key: <key>.' });
  };
  // 3. Replay of an earlier outcome for the same Idempotency-Key: before the
  //    limiter, so a retry spends no second token.
  const replay = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key'];
    if (key === undefined) return;
    if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key)) {
      return reply.code(400).send({ error: 'invalid_request', message: 'Idempotency-Key: 1 to 255 visible ASCII characters' });
    }
    const found = idempotency.lookup(scopeOf(stateOf(request).principal!), key, request.body);
    if (found.kind === 'replay') return reply.code(found.outcome.status).header('Idempotent-Replayed', 'true').send(found.outcome.body);
    if (found.kind === 'in_progress')
      return reply.code(409).send({ error: 'idempotency_key_in_use', message: 'A request with this Idempotency-Key is still being processed.' });
    if (found.kind === 'mismatch') {
      return reply.code(422).send({ error: 'idempotency_key_reused', message: 'This Idempotency-Key was used with a different request body.' });
    }
  };
  // 4. Orders in progress, across every replica: the user's share first, then
  //    the tenant's cap, so a user over their share takes no tenant place. Both
  //    leases are taken before the rate limits are spent (a full cap costs
  //    nothing) and end when the answer is ready or the connection closes, also
  //    on errors, client aborts and answers the client does not read.
  const principal = (request: FastifyRequest) => {
    const { user, tenant } = stateOf(request).principal!;
    return { user, tenant };
  };
  const inFlight: InFlightLease[] = [];
  for (const policy of [userInFlightPolicy, inFlightPolicy]) {
    if (policy !== false) inFlight.push(inFlightLease({ quota: options.quota, policy, identify: principal }));
  }
  // 5. Application limiter: the authenticated user's order bucket.
  const ordersLimit = fastifyRateLimit({ client: options.quota, policy: ordersPolicy, identify: principal });

  const edgeAndAuthentication = [
    async (request: FastifyRequest) => {
      state.set(request, { auth: options.credentials.authenticate(request.headers) });
    },
    ipLimit,
    authenticate,
  ];

  app.get<{ Params: { id: string } }>('/api/orders/:id', { onRequest: edgeAndAuthentication }, async (request, reply) => {
    const { user, tenant } = stateOf(request).principal!;
    const order = await options.orders.findOrder(request.params.id);
    // Another user's order is as absent as one that never existed: ids cannot be probed.
    if (order === undefined || order.user !== user || order.tenant !== tenant) {
      return reply.code(404).send({ error: 'not_found', message: 'No such order.' });
    }
    return reply.send(order);
  });

  app.post(
    '/api/orders',
    {
      onRequest: edgeAndAuthentication,
      preHandler: [replay, ...inFlight.map((lease) => lease.preHandler), ordersLimit],
      onSend: inFlight.map((lease) => lease.onSend),
    },
    async (request, reply) => {
      const principal = stateOf(request).principal!;
      const input = validateOrder(request.body);
      if ('error' in input) return reply.code(400).send({ error: 'invalid_request', message: input.error });

      const key = request.headers['idempotency-key'] as string | undefined;
      const scope = scopeOf(principal);
      try {
        if (key !== undefined && !idempotency.begin(scope, key, request.body)) {
          return reply.code(409).send({ error: 'idempotency_key_in_use', message: 'A request with this Idempotency-Key is still being processed.' });
        }
        const outcome = await placeOrder(options.orders, principal, input);
        if (key !== undefined) idempotency.finish(scope, key, outcome);
        if (outcome.status === 201) reply.header('Location', `/api/orders/${(outcome.body as { id: string }).id}`);
        return reply.code(outcome.status).send(outcome.body);
      } catch (error) {
        if (key !== undefined) idempotency.abandon(scope, key);
        throw error;
      }
    },
  );
  return app;
}

async function placeOrder(orders: OrderStore, principal: Principal, input: { sku: string; quantity: number }) {
  const stock = await orders.readStock(input.sku);
  if (stock === undefined) return { status: 404, body: { error: 'unknown_sku', message: `No product with sku "${input.sku}".` } };
  if (stock < input.quantity) return { status: 409, body: { error: 'out_of_stock', message: `Only ${stock} of "${input.sku}" left.` } };
  const order = await orders.createOrder({ sku: input.sku, quantity: input.quantity, user: principal.user, tenant: principal.tenant });
  if (order === undefined) return { status: 409, body: { error: 'out_of_stock', message: `"${input.sku}" ran out meanwhile.` } };
  return { status: 201, body: order };
}

function validateOrder(body: unknown): { sku: string; quantity: number } | { error: string } {
  if (typeof body !== 'object' || body === null) return { error: 'body: must be a JSON object {"sku": "...", "quantity": n}' };
  const { sku, quantity } = body as Record<string, unknown>;
  if (typeof sku !== 'string' || !/^[a-z0-9-]{1,64}$/.test(sku)) return { error: 'sku: must be 1 to 64 of a-z, 0-9, "-"' };
  if (typeof quantity !== 'number' || !Number.isInteger(quantity) || quantity < 1 || quantity > 100) {
    return { error: 'quantity: must be an integer from 1 to 100' };
  }
  return { sku, quantity };
}

/** Idempotency keys are per user: two users may pick the same key. */
function scopeOf(principal: Principal): string {
  return createHash('sha256').update(`${principal.tenant}\n${principal.user}`).digest('hex');
}
