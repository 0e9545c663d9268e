import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import type { OrderApiOptions } from '../../clients/order-api/app.js';
import { OrderStore } from '../../clients/order-api/order-store.js';
import { ALICE, BOB, post, type RunningApi, startOrderApi } from '../support/order-api.js';
import { shippedPolicies, startTestService, type TestService } from '../support/quota-service.js';
import { openConnection, rawOrder, rawRequest, readResponses } from '../support/raw-http.js';
import { memoryFixture, type StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

// The order API against clients that keep connections open without reading the
// answers, or pipeline requests, with the shipped policies (config/policies.yaml):
// 20 orders in flight per tenant, 5 per user, 10 orders in a user's bucket.

const redis = useRedisServer();

/** Orders whose write waits until the test opens the gate; each waiting order is counted. */
function gatedOrderStore() {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let waiting = 0;
  const arrivals: (() => void)[] = [];
  const store = new OrderStore({ widget: 1000 }, async () => {
    waiting++;
    for (const arrived of arrivals.splice(0)) arrived();
    await gate;
  });
  return {
    store,
    open,
    /** Resolves once `n` orders wait at the gate. */
    async waitingFor(n: number) {
      while (waiting < n) await new Promise<void>((resolve) => arrivals.push(resolve));
    },
  };
}

/**
 * The server's side of the API's connections: for each, its socket and the
 * responses to the requests it read, so that a test sees where the server
 * stands with a client that reads nothing.
 */
function watchConnections(api: RunningApi) {
  const sockets: Socket[] = [];
  const responses = new Map<Socket, ServerResponse[]>();
  api.app.server.on('connection', (socket: Socket) => sockets.push(socket));
  api.app.server.on('request', (request, response) => {
    const list = responses.get(request.socket) ?? [];
    list.push(response);
    responses.set(request.socket, list);
  });
  return {
    /** The server's end of the test's connection `client`. */
    serverEnd: (client: Socket) =>
      vi.waitFor(() => sockets.find((socket) => socket.remotePort === client.localPort) ?? Promise.reject(new Error('not accepted yet'))),
    /** How many requests the server read from `server`'s connection, and how many of them it has answered (the answer written, not necessarily delivered). */
    requests: (server: Socket) => {
      const list = responses.get(server) ?? [];
      return { read: list.length, answered: list.filter((response) => response.writableEnded).length };
    },
  };
}

/** A real quota service with the shipped policies on `makeFixture`'s store, and order APIs on it, closed after each test. */
function useOrderApis(makeFixture: () => StoreFixture) {
  let fixture: StoreFixture;
  let service: TestService;
  let quota: QuotaClient;
  const apis: RunningApi[] = [];
  const connections: Socket[] = [];
  const gates: (() => void)[] = [];
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store, await shippedPolicies());
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await quota?.close();
    await service?.stop();
  });
  afterEach(async () => {
    // Orders still held at a gate (a failed test) would keep the API from closing.
    for (const open of gates.splice(0)) open();
    for (const socket of connections.splice(0)) socket.destroy();
    await Promise.all(apis.splice(0).map((api) => api.app.close()));
    await fixture.reset();
  });
  const placesHeld = async (policy: string, identity: Record<string, string>) => (await service.client.getQuota({ policy, identity })).limits[0]!.leasesHeld;
  return {
    gatedOrders: () => {
      const gated = gatedOrderStore();
      gates.push(gated.open);
      return gated;
    },
    start: async (orders = new OrderStore({ widget: 100_000 }), extra: Partial<OrderApiOptions> = {}, level = 'warn') => {
      const api = await startOrderApi(quota, extra, orders, level);
      apis.push(api);
      return api;
    },
    connection: async (api: RunningApi) => {
      const socket = await openConnection(api);
      connections.push(socket);
      return socket;
    },
    /** The places of acme's cap (orders.in-flight) held now, as the quota service counts them. */
    tenantPlaces: () => placesHeld('orders.in-flight', { tenant: 'acme' }),
    /** The places of `user`'s share (orders.in-flight.user) held now. */
    userPlaces: (user: string) => placesHeld('orders.in-flight.user', { user }),
  };
}

describe('an attacker who pipelines orders on 2 connections and reads no answer, the quota service on the embedded store', () => {
  const { start, connection, tenantPlaces, userPlaces } = useOrderApis(memoryFixture);

  it.each([
    ['at most 4 requests of a connection at once (the default)', {}],
    ['with no bound per connection', { pipelineLimit: 1_000_000 }],
  ])(
    "%s: holds none of the tenant's places once its orders are answered; another user's order is accepted; none is held after its connections close",
    async (_bound, extra) => {
      const api = await start(undefined, extra);
      const watch = watchConnections(api);
      // Each round: requests for a missing page (answered 404, no quota asked) that fill the way back, then orders.
      const round = rawRequest('GET', '/nowhere').repeat(1_000) + rawOrder(ALICE).repeat(25);
      /**
       * Writes rounds on a new connection, each once the server has answered the
       * one before, until the server stops reading it because its answers cannot
       * be delivered: it holds bytes the connection does not take. The round it
       * read last has its orders' answers stuck behind. Then waits until the
       * server has answered every request it read: whatever is held after that is
       * held for an attacker who reads nothing.
       */
      const attack = async () => {
        const client = await connection(api);
        const server = await watch.serverEnd(client);
        const stuck = () => server.isPaused() && server.writableLength > 0;
        let written = 0;
        while (!stuck()) {
          client.write(round);
          written += 1_025;
          await vi.waitFor(() => expect(stuck() || watch.requests(server).answered === written).toBe(true), { timeout: 10_000 });
        }
        await vi.waitFor(() => expect(watch.requests(server).answered).toBe(watch.requests(server).read), { timeout: 10_000 });
        expect(stuck()).toBe(true);
        return client;
      };
      const attackers = [await attack(), await attack()];

      expect(await tenantPlaces()).toBe(0);
      expect(await userPlaces('alice')).toBe(0);
      const bob = await post(api, BOB);
      expect(bob.status).toBe(201);

      for (const socket of attackers) socket.destroy();
      await vi.waitFor(async () => expect(await tenantPlaces()).toBe(0), { timeout: 2_000 });
    },
  );
});

describe.each(bothStores(redis))('orders in flight per user and per connection, the quota service on the %s store', (_name, makeFixture) => {
  const { gatedOrders, start, connection, tenantPlaces, userPlaces } = useOrderApis(makeFixture);

  it("one user holds at most 5 of the tenant's 20 places: their sixth order in progress is 429 user-orders-in-flight and takes no tenant place; another user of the tenant still gets in", async () => {
    const gated = gatedOrders();
    const api = await start(gated.store);
    const refused: Response[] = [];
    // 8 orders at once, each on its own connection.
    const alice = Array.from({ length: 8 }, () =>
      post(api, ALICE).then((response) => {
        if (response.status !== 201) refused.push(response);
        return response;
      }),
    );
    await gated.waitingFor(5);
    await vi.waitFor(() => expect(refused.length).toBe(3));
    for (const response of refused) {
      expect(response.status).toBe(429);
      expect(response.headers.get('retry-after')).not.toBeNull();
      expect(await response.json()).toMatchObject({ error: 'rate_limit_exceeded', policy: 'orders.in-flight.user', limit: 'user-orders-in-flight' });
    }
    expect(await userPlaces('alice')).toBe(5);
    expect(await tenantPlaces()).toBe(5);
    expect(api.orders.stockReads).toBe(5);

    const bob = post(api, BOB);
    await gated.waitingFor(6);
    expect(await tenantPlaces()).toBe(6);
    gated.open();
    expect((await Promise.all(alice)).filter((response) => response.status === 201)).toHaveLength(5);
    expect((await bob).status).toBe(201);
    await vi.waitFor(async () => expect(await tenantPlaces()).toBe(0));
    expect(await userPlaces('alice')).toBe(0);
  });

  it('a connection has at most 4 requests in progress: pipelined requests beyond are answered 429 at once, with no lease taken and no order', async () => {
    const gated = gatedOrders();
    const api = await start(gated.store, {}, 'info');
    const watch = watchConnections(api);
    const client = await connection(api);
    client.write(rawOrder(ALICE).repeat(6));
    await gated.waitingFor(4);
    const server = await watch.serverEnd(client);
    // The fifth and sixth are answered while the first four still run (their answers wait their turn on the connection).
    await vi.waitFor(() => expect(watch.requests(server)).toEqual({ read: 6, answered: 2 }));
    expect(await tenantPlaces()).toBe(4);
    expect(api.orders.stockReads).toBe(4);

    gated.open();
    const answers = await readResponses(client, 6);
    expect(answers.map((answer) => answer.status)).toEqual([201, 201, 201, 201, 429, 429]);
    expect(answers[4]!.headers['retry-after']).toBe('1');
    expect(JSON.parse(answers[4]!.body)).toEqual({
      error: 'too_many_requests_on_connection',
      message: 'At most 4 requests of one connection are handled at once; read the answers before sending more.',
    });
    expect(api.orders.count()).toBe(4);
    await vi.waitFor(async () => expect(await tenantPlaces()).toBe(0));
    // One line for the connection, not one per refused request.
    const lines = api.logs.map((line) => JSON.parse(line) as { msg: string; limit?: number; res?: { statusCode: number } });
    expect(lines.filter((line) => line.msg === 'requests beyond the connection limit refused')).toMatchObject([{ limit: 4 }]);
    expect(lines.filter((line) => line.msg === 'request completed').map((line) => line.res?.statusCode)).toEqual([201, 201, 201, 201]);
  });

  it('a connection that closes releases at once the places of all its orders in progress, pipelined ones too', async () => {
    const gated = gatedOrders();
    const api = await start(gated.store);
    const client = await connection(api);
    client.write(rawOrder(ALICE).repeat(2));
    await gated.waitingFor(2);
    expect(await tenantPlaces()).toBe(2);

    client.destroy();
    await vi.waitFor(async () => expect(await tenantPlaces()).toBe(0), { timeout: 2_000 });
    expect(await userPlaces('alice')).toBe(0);
    gated.open();
  });
});
