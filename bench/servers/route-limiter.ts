import type { QuotaClient } from '@quota-service/client';
import type { Redis } from 'ioredis';

/** The header the bench's load sets to the caller's user id, as an authentication layer would have. */
export const ROUTE_USER_HEADER = 'x-user';
/**
 * Every limiter keeps a fixed window per user of this many calls per WINDOW_MS:
 * nobody runs dry during a run, so every request is an allowed decision that
 * reached Redis, for every limiter alike.
 */
export const WINDOW_LIMIT = 1_000_000_000;
export const WINDOW_MS = 3_600_000;

/**
 * How long a route server keeps an idle keep-alive connection. The load opens
 * a connection per request in flight and leaves most idle while the other
 * kinds run; a server that closed them (Fastify after 72 s) would race the
 * client reusing them, and the request would fail with "socket hang up".
 */
export const ROUTE_KEEP_ALIVE_MS = 600_000;

/** What guards the bench route: nothing, the quota service through its client, or the framework's own Redis limiter. */
export type RouteLimiter = { kind: 'none' } | { kind: 'quota'; quota: QuotaClient } | { kind: 'native'; redis: Redis };
