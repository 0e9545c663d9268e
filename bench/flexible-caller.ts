import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import type { AllowCaller } from './client.js';

/** The same distinct identities the quota client cycles over (bench/quota-client-caller.ts). */
const USERS = 10_000;

/**
 * rate-limiter-flexible as its README sets it up for Redis: one ioredis client
 * with the offline queue off, plus auto-pipelining, which gives it what the
 * quota service's script batcher gives the service (the calls of one turn in
 * one write; the service's own client no longer needs it, src/store/redis/redis-store.ts).
 * A limit so large that nobody runs dry, like the service's bench policy:
 * every call is an allowed decision that runs its Lua script.
 */
export function flexibleCaller(redisUrl: string): AllowCaller {
  const client = new Redis(redisUrl, { enableOfflineQueue: false, enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: 'flexible', points: 1_000_000_000, duration: 3600 });
  const keys = Array.from({ length: USERS }, (_, i) => `bench-user-${i}`);
  let next = 0;
  return {
    async call() {
      const key = keys[next] as string;
      next = (next + 1) % USERS;
      // consume rejects with a RateLimiterRes when the limit is exceeded (never here) or with an Error.
      await limiter.consume(key, 1);
      return true;
    },
    close: () => client.disconnect(),
  };
}
