import { Agent, request } from 'node:http';
import type { AllowCaller } from './client.js';

const BODY = JSON.stringify({ sku: 'widget', quantity: 1 });
const USERS = ['dev-token-alice', 'dev-token-bob', 'dev-token-carol'];

/** POST /api/orders over keep-alive connections; true when the answer is 201. */
export function orderCaller(port: number, connections: number): AllowCaller {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  let next = 0;
  return {
    call: (signal) =>
      new Promise<boolean>((resolve, reject) => {
        const token = USERS[next++ % USERS.length] as string;
        const req = request(
          {
            host: '127.0.0.1',
            port,
            path: '/api/orders',
            method: 'POST',
            agent,
            signal,
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) },
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
