import rateLimit from '@fastify/rate-limit';
import { fastifyRateLimit } from '@quota-service/http/fastify';
import Fastify, { type FastifyInstance } from 'fastify';
import { ROUTE_KEEP_ALIVE_MS, type RouteLimiter, ROUTE_USER_HEADER, WINDOW_LIMIT, WINDOW_MS } from './route-limiter.js';

/**
 * POST /api/orders on Fastify, answering 201, behind `limiter`: none, the quota
 * service's Fastify hook, or @fastify/rate-limit on Redis as its README sets it
 * up (plugin registered, limit in the route's config).
 */
export async function fastifyRoute(limiter: RouteLimiter): Promise<FastifyInstance> {
  // Idle connections stay open for the whole run (see ROUTE_KEEP_ALIVE_MS).
  const app = Fastify({ keepAliveTimeout: ROUTE_KEEP_ALIVE_MS });
  const userOf = (headers: Record<string, string | string[] | undefined>) => String(headers[ROUTE_USER_HEADER] ?? '');
  if (limiter.kind === 'native') {
    await app.register(rateLimit, { global: false, redis: limiter.redis, skipOnError: false });
  }
  const options =
    limiter.kind === 'quota'
      ? { onRequest: fastifyRateLimit({ client: limiter.quota, policy: 'bench-window', identify: (request) => ({ user: userOf(request.headers) }) }) }
      : limiter.kind === 'native'
        ? {
            config: {
              rateLimit: {
                max: WINDOW_LIMIT,
                timeWindow: WINDOW_MS,
                keyGenerator: (request: { headers: Record<string, string | string[] | undefined> }) => userOf(request.headers),
              },
            },
          }
        : {};
  let next = 0;
  app.post('/api/orders', options, async (_request, reply) => reply.code(201).send({ id: ++next }));
  return app;
}
