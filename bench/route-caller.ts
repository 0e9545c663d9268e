import { Agent, request } from 'node:http';
import type { AllowCaller } from './client.js';
import { ROUTE_USER_HEADER } from './servers/route-limiter.js';

const BODY = JSON.stringify({ sku: 'widget', quantity: 1 });
/** Distinct users the load cycles through, as bench/client.ts. */
const USERS = 10_000;

/**
 * POST /api/orders to a bench/servers/http-route-server.ts child over
 * keep-alive connections (up to `connections`), as user `bench-user-<n>` in the
 * user header; true when the answer is 201, an error otherwise (a 429 or 503
 * would mean the bench no longer measures the allowed path).
 */
export function routeCaller(port: number, connections: number): AllowCaller {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const users = Array.from({ length: USERS }, (_, i) => `bench-user-${i}`);
  let next = 0;
  return {
    call: (signal) =>
      new Promise<boolean>((resolve, reject) => {
        const user = users[next] as string;
        next = (next + 1) % USERS;
        const req = request(
          {
            host: '127.0.0.1',
            port,
            path: '/api/orders',
            method: 'POST',
            agent,
            signal,
            headers: { [ROUTE_USER_HEADER]: user, 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) },
          },
          (res) => {
            res.resume();
            res.on('end', () => (res.statusCode === 201 ? resolve(true) : reject(new Error(`HTTP ${res.statusCode}`))));
          },
        );
        req.on('error', reject);
        req.end(BODY);
      }),
    close: () => agent.destroy(),
  };
}
