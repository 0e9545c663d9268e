import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest, onSendAsyncHookHandler, preHandlerAsyncHookHandler } from 'fastify';
import { toOutcome } from '@quota-service/http';
import type { Lease, QuotaClient } from '@quota-service/client';

export interface InFlightLeaseOptions {
  quota: Pick<QuotaClient, 'acquire'>;
  /** The policy with the `concurrency` limit, e.g. orders.in-flight (per tenant). */
  policy: string;
  /** The identity the lease counts, from the authenticated principal. */
  identify: (request: FastifyRequest) => Record<string, string>;
}

/** The two hooks of a lease on a route: both go on the route, the preHandler in the order the leases are taken. */
export interface InFlightLease {
  /** Acquires the lease; a full cap answers 429 and the route does not run. */
  preHandler: preHandlerAsyncHookHandler;
  /** Releases it once the answer is ready to be written. */
  onSend: onSendAsyncHookHandler;
}

/**
 * Bounded work in progress across every replica: a Fastify preHandler that
 * acquires a concurrency lease from the quota service, held while the request
 * is worked on. A full cap answers 429 with Retry-After and the body of a rate
 * limit's denial (503 when the quota service cannot decide and the lease fails
 * closed); the route does not run. No queue: a backlog never grows.
 *
 * The lease ends at the first of:
 * - the answer is ready (onSend: sent, 4xx or a failure's 500), whether or not
 *   the client reads it: a client that reads nothing, or pipelines requests
 *   behind one whose answer it does not read, holds no place with answers it
 *   cannot be given;
 * - the connection closes (the client went away; the order's work may still
 *   finish, uncounted), pipelined requests queued on it included;
 * - the response closes without an answer from the route.
 * A client that goes away while the lease is being acquired gets no order: the
 * lease is released as soon as it arrives and the route does not run.
 */
export function inFlightLease(options: InFlightLeaseOptions): InFlightLease {
  const ends = new WeakMap<FastifyRequest, () => void>();
  return {
    async preHandler(request: FastifyRequest, reply: FastifyReply) {
      const socket = request.raw.socket;
      // The connection may close while the acquire is in flight: listen from before it starts.
      let gone = socket.destroyed;
      const unwatch = onClose(socket, () => {
        gone = true;
      });
      const lease = await options.quota.acquire({ policy: options.policy, identity: options.identify(request) });
      unwatch();
      if (gone || socket.destroyed) {
        // Nobody is left to answer, and an order run now would hold no place in the cap.
        if (lease.acquired) release(lease, request, options.policy);
        reply.hijack();
        return;
      }
      if (!lease.acquired) {
        const outcome = toOutcome(options.policy, lease.decision);
        reply.headers(outcome.headers);
        if (outcome.action === 'respond') return reply.code(outcome.status).send(outcome.body);
        return;
      }
      const end = () => {
        ends.delete(request);
        unwatchEnd();
        reply.raw.removeListener('close', end);
        release(lease, request, options.policy);
      };
      // A pipelined request's response is not the connection's yet: only the socket tells that it closed.
      const unwatchEnd = onClose(socket, end);
      reply.raw.once('close', end);
      ends.set(request, end);
      // The lease was lost (not renewed in time): the work carries on, but say so.
      lease.signal.addEventListener('abort', () => request.log.warn({ policy: options.policy }, 'in-flight lease lost while the order was in progress'), {
        once: true,
      });
    },
    async onSend(request: FastifyRequest, _reply: FastifyReply, payload: unknown) {
      ends.get(request)?.();
      return payload;
    },
  };
}

/** Per connection, what to do when it closes: one 'close' listener however many requests and leases it carries. */
const closing = new WeakMap<Socket, Set<() => void>>();

/** Calls `callback` when `socket` closes (it has not yet); the function returned stops that. */
function onClose(socket: Socket, callback: () => void): () => void {
  let callbacks = closing.get(socket);
  if (callbacks === undefined) {
    const set = new Set<() => void>();
    closing.set(socket, set);
    socket.once('close', () => {
      closing.delete(socket);
      for (const call of set) call();
    });
    callbacks = set;
  }
  callbacks.add(callback);
  const registered = callbacks;
  return () => registered.delete(callback);
}

function release(lease: Lease, request: FastifyRequest, policy: string): void {
  lease.release().catch((error: unknown) => request.log.error({ err: error, policy }, 'in-flight lease could not be released'));
}
