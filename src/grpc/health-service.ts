import { once } from 'node:events';
import { ServerError, Status } from 'nice-grpc';
import { HealthServiceImpl, type HealthState } from 'nice-grpc-server-health';
import { quoteCapped } from '@quota-service/core';

/** The longest service name Health/Check and Health/Watch accept. */
export const MAX_SERVICE_NAME_CHARS = 256;

/**
 * grpc.health.v1.Health as nice-grpc-server-health serves it, with the
 * caller's service name bounded before it is looked up, and at most a capped
 * prefix of it in an error. An error message travels back in HTTP/2 trailers:
 * one repeating a caller's megabyte is never delivered, and every later call
 * on that connection stalls behind it.
 *
 * A Watch ends once `draining` aborts (the server shuts down), right after
 * it has sent the status of that moment (NOT_SERVING): an open Watch would
 * otherwise hold the shutdown for its whole grace period.
 */
export function boundedHealthService(state: HealthState, draining: AbortSignal): HealthServiceImpl {
  const health = HealthServiceImpl(state);
  return {
    check(request, context) {
      checkServiceName(request.service);
      if (state.getStatus(request.service) === 'unknown') {
        throw new ServerError(Status.NOT_FOUND, `service: no service named ${quoteCapped(request.service)}`);
      }
      return health.check(request, context);
    },
    async *watch(request, context) {
      checkServiceName(request.service);
      const woken = AbortSignal.any([context.signal, draining]);
      let last: string | undefined;
      for (;;) {
        const status = state.getStatus(request.service);
        if (status !== last) yield { status: SERVING_STATUS[status] };
        last = status;
        if (draining.aborted) return;
        try {
          await once(state, 'change', { signal: woken });
        } catch (error) {
          // Drained: one more turn sends the final status and ends the stream.
          if (!draining.aborted || context.signal.aborted) throw error;
        }
      }
    },
  };
}

/** grpc.health.v1.HealthCheckResponse.ServingStatus, by HealthState's status names. */
const SERVING_STATUS = { healthy: 1, unhealthy: 2, unknown: 3 } as const;

function checkServiceName(name: string): void {
  if (name.length > MAX_SERVICE_NAME_CHARS) {
    // A ServerError, not a core error: the health-only port has no error middleware.
    throw new ServerError(Status.INVALID_ARGUMENT, `service: must be at most ${MAX_SERVICE_NAME_CHARS} characters, got ${name.length}`);
  }
}
