import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';

/** Requests refused by a connection's limit: the log controller keeps them out of the info lines. */
const refused = new WeakSet<FastifyRequest>();

/** Whether `request` was refused because its connection had too many requests in progress. */
export const refusedOnConnection = (request: FastifyRequest): boolean => refused.has(request);

/**
 * At most `limit` requests of one connection in progress at once. HTTP/1.1
 * lets a client send requests without reading the answers of the ones before
 * (pipelining), and Node.js starts every request it reads at once. A request
 * counts from its arrival until its answer has been handed to the network
 * (or the connection closed): a client that reads nothing thus has at most
 * `limit` requests worked on, and the answers it does not read stop Node.js
 * from reading more of its requests. A request beyond the limit is answered
 * 429 at once, before authentication, limits or business logic, and the
 * connection stays open. Keep-alive clients that wait for each answer (every
 * browser and Node.js's own agent) never meet it.
 *
 * Refusals are cheap to provoke in bulk, so they are logged once per
 * connection (at info, with the first refused request), not once each.
 */
export function requestsPerConnection(limit: number): onRequestAsyncHookHandler {
  const inProgress = new WeakMap<Socket, number>();
  const reported = new WeakSet<Socket>();
  const message = `At most ${limit} requests of one connection are handled at once; read the answers before sending more.`;
  return async function perConnection(request: FastifyRequest, reply: FastifyReply) {
    const socket = request.raw.socket;
    const count = inProgress.get(socket) ?? 0;
    if (count >= limit) {
      refused.add(request);
      if (!reported.has(socket)) {
        reported.add(socket);
        request.log.info({ req: request, limit }, 'requests beyond the connection limit refused');
      }
      return reply.code(429).header('retry-after', '1').send({ error: 'too_many_requests_on_connection', message });
    }
    inProgress.set(socket, count + 1);
    // 'close' follows the answer's last byte handed to the network, or the connection's end.
    reply.raw.once('close', () => inProgress.set(socket, (inProgress.get(socket) ?? 1) - 1));
  };
}
