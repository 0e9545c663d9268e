import { ServerError, Status, type CallContext, type ServerMiddlewareCall } from 'nice-grpc';
import { InvalidArgumentError, PolicyNotFoundError, StoreUnavailableError } from '../engine/errors.js';
import type { Logger } from '../logger.js';

/**
 * The one place that turns engine errors into gRPC statuses. Messages of
 * expected errors go to the caller (they name the bad field); anything else is
 * logged and answered with a bare INTERNAL so nothing internal leaks.
 */
export function errorMiddleware(logger: Logger) {
  return async function* mapErrors<Request, Response>(
    call: ServerMiddlewareCall<Request, Response>,
    context: CallContext,
  ) {
    try {
      return yield* call.next(call.request, context);
    } catch (error) {
      throw toServerError(error, call.method.path, logger);
    }
  };
}

function toServerError(error: unknown, method: string, logger: Logger): unknown {
  if (error instanceof ServerError) return error;
  if (error instanceof InvalidArgumentError) return new ServerError(Status.INVALID_ARGUMENT, error.message);
  if (error instanceof PolicyNotFoundError) return new ServerError(Status.NOT_FOUND, error.message);
  if (error instanceof StoreUnavailableError) {
    logger.warn({ method, err: error.cause }, 'quota store unavailable');
    return new ServerError(Status.UNAVAILABLE, error.message);
  }
  logger.error({ method, err: error }, 'unexpected error');
  return new ServerError(Status.INTERNAL, 'internal error');
}
