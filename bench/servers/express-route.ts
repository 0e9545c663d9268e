import { createServer, type Server } from 'node:http';
import { expressRateLimit } from '@quota-service/http/express';
import express, { type RequestHandler } from 'express';
import { rateLimit } from 'express-rate-limit';
import { RedisStore, type RedisReply } from 'rate-limit-redis';
import { type RouteLimiter, ROUTE_USER_HEADER, WINDOW_LIMIT, WINDOW_MS } from './route-limiter.js';

/**
 * POST /api/orders on Express, answering 201, behind `limiter`: none, the
 * quota service's Express middleware, or express-rate-limit with
 * rate-limit-redis as their READMEs set them up for ioredis.
 */
export function expressRoute(limiter: RouteLimiter): Server {
  const app = express();
  const userOf = (header: string | undefined) => header ?? '';
  const guard: RequestHandler[] =
    limiter.kind === 'quota'
      ? [expressRateLimit({ client: limiter.quota, policy: 'bench-window', identify: (request) => ({ user: userOf(request.get(ROUTE_USER_HEADER)) }) })]
      : limiter.kind === 'native'
        ? [
            rateLimit({
              windowMs: WINDOW_MS,
              limit: WINDOW_LIMIT,
              standardHeaders: 'draft-8',
              legacyHeaders: false,
              keyGenerator: (request) => userOf(request.get(ROUTE_USER_HEADER)),
              store: new RedisStore({
                sendCommand: (command: string, ...args: string[]) => limiter.redis.call(command, ...args) as Promise<RedisReply>,
              }),
            }),
          ]
        : [];
  let next = 0;
  app.post('/api/orders', ...guard, (_request, response) => {
    response.status(201).json({ id: ++next });
  });
  return createServer(app);
}
