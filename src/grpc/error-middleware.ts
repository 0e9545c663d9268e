import { ServerError, Status, type CallContext, type ServerMiddlewareCall } from 'nice-grpc';
import {
  FailedPreconditionError,
  InvalidArgumentError,
  LeaseNotHeldError,
  NoConcurrencyLimitError,
  NotFoundError,
  PermissionDeniedError,
  PolicyNotFoundError,
  StoreUnavailableError,
} from '@quota-service/core';
import type { BatchItemError } from '@quota-service/contract';
import type { Logger } from '../logger.js';

/**
 * The one place that turns engine errors into gRPC statuses. Messages of
 * expected errors go to the caller (they name the bad field); anything else is
 * logged and answered with a bare INTERNAL so nothing internal leaks.
 */
export function errorMiddleware(logger: Logger) {
  return async function* mapErrors<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
    try {
      return yield* call.next(call.request, context);
    } catch (error) {
      throw toServerError(error, call.method.path, logger);
    }
  };
}

/**
 * One item of AllowBatch failed: the status Allow would have failed with, its
 * message placed inside the batch (`requests[3].cost: ...`), so one bad item
 * of a coalesced batch fails only its own caller.
 */
export function batchItemError(error: unknown, index: number, method: string, logger: Logger): BatchItemError {
  const status = toServerError(error, method, logger);
  // Field errors start with the field name; others are a plain sentence.
  const fieldError = error instanceof InvalidArgumentError || error instanceof PolicyNotFoundError;
  return { code: status.code, message: `requests[${index}]${fieldError ? '.' : ': '}${status.details}` };
}

/** The status a call that failed with `error` answers (expected errors keep their message; anything else is logged and INTERNAL). */
export function toServerError(error: unknown, method: string, logger: Logger): ServerError {
  if (error instanceof ServerError) return error;
  if (error instanceof InvalidArgumentError) return new ServerError(Status.INVALID_ARGUMENT, error.message);
  if (error instanceof PolicyNotFoundError || error instanceof NotFoundError) return new ServerError(Status.NOT_FOUND, error.message);
  if (error instanceof LeaseNotHeldError) return new ServerError(Status.NOT_FOUND, error.message);
  if (error instanceof NoConcurrencyLimitError || error instanceof FailedPreconditionError) return new ServerError(Status.FAILED_PRECONDITION, error.message);
  if (error instanceof PermissionDeniedError) return new ServerError(Status.PERMISSION_DENIED, error.message);
  if (error instanceof StoreUnavailableError) {
    // An outage, not a bug: what happened, without a stack trace per call.
    logger.warn({ method, cause: describeCause(error.cause) }, 'quota store unavailable');
    return new ServerError(Status.UNAVAILABLE, error.message);
  }
  logger.error({ method, err: error }, 'unexpected error');
  return new ServerError(Status.INTERNAL, 'internal error');
}

/** The store's trouble in one line: the innermost message (a timeout, a refused connection). */
function describeCause(cause: unknown): string {
  let inner = cause;
  while (inner instanceof Error && inner.cause !== undefined) inner = inner.cause;
  return inner instanceof Error ? inner.message : String(inner);
}
