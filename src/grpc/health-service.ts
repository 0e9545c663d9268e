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
 */
export function boundedHealthService(state: HealthState): HealthServiceImpl {
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
      yield* health.watch(request, context);
    },
  };
}

function checkServiceName(name: string): void {
  if (name.length > MAX_SERVICE_NAME_CHARS) {
    // A ServerError, not a core error: the health-only port has no error middleware.
    throw new ServerError(Status.INVALID_ARGUMENT, `service: must be at most ${MAX_SERVICE_NAME_CHARS} characters, got ${name.length}`);
  }
}
