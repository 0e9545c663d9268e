import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { expressRateLimit } from '@quota-service/http/express';
import { fastifyRateLimit } from '@quota-service/http/fastify';
import type { DenialMessage, RateLimitCheckOptions, RateLimitDenial, RefundResult } from '@quota-service/http';
import type { Framework } from './http-apps.js';

/**
 * One route per spec on Express or on Fastify, listening on 127.0.0.1:<free>,
 * each limited by policy `orders` keyed by the user of `Authorization: Bearer
 * <user>`, then answering `status` with `{ ok: true }`. The options the spec
 * names are the adapter's own; `handler: true` answers a 429 with
 * `{ handled: <denied by> }` and `X-Handled: yes`; `skipHeader` skips the
 * check when that header is `yes`.
 */
export interface OptionRoute {
  path: string;
  /** The status the route answers; 'never': it does not answer (until the client goes away). */
  status: number | 'never';
  cost?: number;
  skipHeader?: string;
  message?: DenialMessage<unknown>;
  handler?: true;
  skipFailedRequests?: boolean;
  skipSuccessfulRequests?: boolean;
  legacyHeaders?: boolean;
}

export interface OptionApp {
  readonly url: string;
  /** How many times a route handler ran. */
  readonly handled: () => number;
  /** Resolves once route handlers have run `count` times in all. */
  handledAtLeast(count: number): Promise<void>;
  /** Resolves with the next `count` refunds (after those earlier calls took) once they are over; rejects after 3 s without them. */
  refunds(count: number): Promise<RefundResult[]>;
  close(): Promise<void>;
}

type Client = RateLimitCheckOptions<unknown>['client'];

export async function startOptionApp(framework: Framework, client: Client, routes: OptionRoute[]): Promise<OptionApp> {
  let handled = 0;
  const refunds: RefundResult[] = [];
  const waiters: (() => void)[] = [];
  const wakeAll = () => {
    for (const wake of waiters.splice(0)) wake();
  };
  const onRefund = (result: RefundResult) => {
    refunds.push(result);
    wakeAll();
  };
  const ran = () => {
    handled++;
    wakeAll();
  };
  const handledAtLeast = (count: number) =>
    new Promise<void>((resolve) => {
      const look = () => (handled < count ? void waiters.push(look) : resolve());
      look();
    });
  const common = <Req extends { headers: IncomingHttpHeaders }>(route: OptionRoute): RateLimitCheckOptions<Req> => ({
    client,
    policy: 'orders',
    identify: (request) => ({ user: /^Bearer (\w+)$/.exec(request.headers.authorization ?? '')?.[1] ?? 'anonymous' }),
    ...(route.cost === undefined ? {} : { cost: () => route.cost! }),
    ...(route.skipHeader === undefined ? {} : { skip: (request: Req) => request.headers[route.skipHeader!] === 'yes' }),
    ...(route.message === undefined ? {} : { message: route.message }),
    skipFailedRequests: route.skipFailedRequests ?? false,
    skipSuccessfulRequests: route.skipSuccessfulRequests ?? false,
    legacyHeaders: route.legacyHeaders ?? false,
    onRefund,
  });
  let taken = 0;
  const refundsOf = (count: number) =>
    new Promise<RefundResult[]>((resolve, reject) => {
      const from = taken;
      taken += count;
      const timer = setTimeout(() => reject(new Error(`${refunds.length} refunds in all after 3 s, waited for ${from + count}`)), 3_000);
      const look = () => {
        if (refunds.length < from + count) return void waiters.push(look);
        clearTimeout(timer);
        resolve(refunds.slice(from, from + count));
      };
      look();
    });

  if (framework === 'express') {
    const app = express();
    for (const route of routes) {
      const limit = expressRateLimit({
        ...common<express.Request>(route),
        ...(route.handler
          ? {
              handler: (_req: express.Request, res: express.Response, _next: express.NextFunction, denial: RateLimitDenial) => {
                res.status(429).set('X-Handled', 'yes').json({ handled: denial.decision.deniedBy });
              },
            }
          : {}),
      });
      app.get(route.path, limit, (_req, res) => {
        ran();
        if (route.status !== 'never') res.status(route.status).json({ ok: true });
      });
    }
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      handled: () => handled,
      handledAtLeast,
      refunds: refundsOf,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  }

  const app = Fastify();
  for (const route of routes) {
    const limit = fastifyRateLimit({
      ...common<FastifyRequest>(route),
      ...(route.handler
        ? {
            handler: (_request: unknown, reply: FastifyReply, denial: RateLimitDenial) =>
              reply.code(429).header('X-Handled', 'yes').send({ handled: denial.decision.deniedBy }),
          }
        : {}),
    });
    app.get(route.path, { onRequest: limit }, async (_request, reply) => {
      ran();
      if (route.status === 'never') return reply.hijack();
      return reply.code(route.status).send({ ok: true });
    });
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    handled: () => handled,
    handledAtLeast,
    refunds: refundsOf,
    close: () => app.close(),
  };
}
