import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { clientIpResolver } from '@quota-service/http';
import { expressRateLimit } from '@quota-service/http/express';
import { fastifyRateLimit } from '@quota-service/http/fastify';
import type { QuotaDecider } from '@quota-service/core';

/**
 * The same tiny app on Express and on Fastify, listening on 127.0.0.1:<free>:
 * a stand-in authentication (Authorization: Bearer <user>@<tenant>) sets the
 * principal, then the rate-limit check, then a handler that counts its runs.
 *   GET /orders  policy `orders`, keyed by the principal (401 without one)
 *   GET /ip      policy `ip`, keyed by the client IP; echoes the IP it used
 *   GET /bad-policy    policy `nope`, which the quota service does not have
 *   GET /bad-identity  policy `orders`, keyed by a user name over the 256 bytes the quota service accepts
 */
export interface HttpApp {
  readonly url: string;
  /** How many times a route handler ran. */
  readonly handled: () => number;
  close(): Promise<void>;
}

export type Framework = 'express' | 'fastify';

interface Principal {
  user: string;
  tenant: string;
}

function principalOf(authorization: string | undefined): Principal | undefined {
  const match = /^Bearer ([a-z0-9]+)@([a-z0-9]+)$/.exec(authorization ?? '');
  return match ? { user: match[1]!, tenant: match[2]! } : undefined;
}

export async function startHttpApp(framework: Framework, client: QuotaDecider, trustedProxies: string[] = []): Promise<HttpApp> {
  const clientIp = clientIpResolver(trustedProxies);
  let handled = 0;
  const tooLong = () => ({ user: 'u'.repeat(300) });

  if (framework === 'express') {
    type Req = express.Request & { principal?: Principal };
    const app = express();
    app.use((req: Req, _res, next) => {
      req.principal = principalOf(req.headers.authorization);
      next();
    });
    app.get(
      '/orders',
      (req: Req, res, next) => (req.principal ? next() : res.status(401).json({ error: 'unauthenticated' })),
      expressRateLimit<Req>({ client, policy: 'orders', identify: (req) => ({ user: req.principal!.user }) }),
      (_req, res) => {
        handled++;
        res.json({ ok: true });
      },
    );
    app.get('/ip', expressRateLimit({ client, policy: 'ip', identify: (req) => ({ ip: clientIp(req) }) }), (req, res) => {
      handled++;
      res.json({ ip: clientIp(req) });
    });
    app.get('/bad-policy', expressRateLimit({ client, policy: 'nope', identify: () => ({ user: 'x' }) }), (_req, res) => {
      handled++;
      res.json({ ok: true });
    });
    app.get('/bad-identity', expressRateLimit({ client, policy: 'orders', identify: tooLong }), (_req, res) => {
      handled++;
      res.json({ ok: true });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      handled: () => handled,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  }

  const app = Fastify();
  // The principal per request, as the app's authentication would record it.
  const principals = new WeakMap<FastifyRequest, Principal>();
  app.addHook('onRequest', async (request) => {
    const principal = principalOf(request.headers.authorization);
    if (principal) principals.set(request, principal);
  });
  app.get(
    '/orders',
    {
      onRequest: [
        async (request, reply) => {
          if (!principals.has(request)) return reply.code(401).send({ error: 'unauthenticated' });
        },
        fastifyRateLimit({ client, policy: 'orders', identify: (request) => ({ user: principals.get(request)!.user }) }),
      ],
    },
    async () => {
      handled++;
      return { ok: true };
    },
  );
  app.get('/ip', { onRequest: fastifyRateLimit({ client, policy: 'ip', identify: (req) => ({ ip: clientIp(req.raw) }) }) }, async (request) => {
    handled++;
    return { ip: clientIp(request.raw) };
  });
  app.get('/bad-policy', { onRequest: fastifyRateLimit({ client, policy: 'nope', identify: () => ({ user: 'x' }) }) }, async () => {
    handled++;
    return { ok: true };
  });
  app.get('/bad-identity', { onRequest: fastifyRateLimit({ client, policy: 'orders', identify: tooLong }) }, async () => {
    handled++;
    return { ok: true };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    handled: () => handled,
    close: () => app.close(),
  };
}
