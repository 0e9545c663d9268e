import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { toOutcome } from '@quota-service/http';
import type { Lease, QuotaClient } from '@quota-service/client';

export interface InFlightLeaseOptions {
  quota: Pick<QuotaClient, 'acquire'>;
  /** The policy with the `concurrency` limit, e.g. orders.in-flight (per tenant). */
  policy: string;
  /** The identity the lease counts, from the authenticated principal. */
  identify: (request: FastifyRequest) => Record<string, string>;
}

/**
 * Bounded work in progress across every replica: a Fastify preHandler that
 * acquires a concurrency lease from the quota service and holds it until the
 * response ends, however it ends (sent, failed, or the client went away: the
 * raw response's 'close'). A full cap answers 429 with Retry-After and the
 * body of a rate limit's denial (503 when the quota service cannot decide and
 * the lease fails closed); the route does not run. No queue: a backlog never grows.
 * A client that goes away while the lease is being acquired gets no order: the
 * lease is released as soon as it arrives and the route does not run.
 */
export function inFlightLease(options: InFlightLeaseOptions): preHandlerAsyncHookHandler {
  return async function inFlight(request: FastifyRequest, reply: FastifyReply) {
    // 'close' may fire while the acquire is in flight: listen from before it starts.
    let gone = false;
    const onGone = () => {
      gone = true;
    };
    reply.raw.once('close', onGone);
    const lease = await options.quota.acquire({ policy: options.policy, identity: options.identify(request) });
    reply.raw.removeListener('close', onGone);
    if (gone) {
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
    reply.raw.once('close', () => release(lease, request, options.policy));
    // The lease was lost (not renewed in time): the work carries on, but say so.
    lease.signal.addEventListener('abort', () => request.log.warn({ policy: options.policy }, 'in-flight lease lost while the order was in progress'), {
      once: true,
    });
  };
}

function release(lease: Lease, request: FastifyRequest, policy: string): void {
  lease.release().catch((error: unknown) => request.log.error({ err: error, policy }, 'in-flight lease could not be released'));
}
