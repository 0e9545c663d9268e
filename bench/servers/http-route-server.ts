// Child process for bench/http-limiters-run.ts: POST /api/orders on Express or
// Fastify, behind no limiter, the quota service (through @quota-service/http
// and the quota client with its default batching), or the framework's own
// Redis limiter (express-rate-limit + rate-limit-redis, @fastify/rate-limit).
// argv: <express|fastify> <none|quota|native> <quota service port> <redis url>
import type { AddressInfo } from 'node:net';
import { createQuotaClient } from '@quota-service/client';
import { Redis } from 'ioredis';
import { expressRoute } from './express-route.js';
import { fastifyRoute } from './fastify-route.js';
import { failStart, serveUntilParentLeaves } from './lifecycle.js';
import { ROUTE_KEEP_ALIVE_MS, type RouteLimiter } from './route-limiter.js';

const USAGE = 'usage: http-route-server.ts express|fastify none|quota|native <quota service port> redis://127.0.0.1:<port>';

async function main(): Promise<void> {
  const [framework, kind, quotaPort, redisUrl] = process.argv.slice(2);
  if ((framework !== 'express' && framework !== 'fastify') || (kind !== 'none' && kind !== 'quota' && kind !== 'native')) throw new Error(USAGE);
  if (!/^\d+$/.test(quotaPort ?? '') || !redisUrl?.startsWith('redis://127.0.0.1:')) throw new Error(USAGE);
  // The settings @fastify/rate-limit's README recommends for a limiter's ioredis client.
  const redis = kind === 'native' ? new Redis(redisUrl, { connectTimeout: 500, maxRetriesPerRequest: 1 }) : undefined;
  const quota = kind === 'quota' ? createQuotaClient({ address: `127.0.0.1:${quotaPort}`, deadlineMs: 5_000, onUnavailable: 'fail_closed' }) : undefined;
  const limiter: RouteLimiter = quota !== undefined ? { kind: 'quota', quota } : redis !== undefined ? { kind: 'native', redis } : { kind: 'none' };
  const close = async () => {
    await quota?.close();
    redis?.disconnect();
  };
  if (framework === 'fastify') {
    const app = await fastifyRoute(limiter);
    await app.listen({ host: '127.0.0.1', port: 0 });
    serveUntilParentLeaves((app.server.address() as AddressInfo).port, async () => {
      await app.close();
      await close();
    });
    return;
  }
  const server = expressRoute(limiter);
  server.keepAliveTimeout = ROUTE_KEEP_ALIVE_MS;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serveUntilParentLeaves((server.address() as AddressInfo).port, async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await close();
  });
}

main().catch(failStart);
