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
  const status = statusOfError(error, method, logger);
  // Field errors start with the field name; others are a plain sentence.
  const fieldError = error instanceof InvalidArgumentError || error instanceof PolicyNotFoundError;
  return { code: status.code, message: `requests[${index}]${fieldError ? '.' : ': '}${status.details}` };
}

function toServerError(error: unknown, method: string, logger: Logger): ServerError {
  if (error instanceof ServerError) return error;
  const status = statusOfError(error, method, logger);
  return new ServerError(status.code, status.details);
}

/**
 * The status a call that failed with `error` answers: expected errors keep
 * their message; anything else is logged and INTERNAL. As plain data, so the
 * lean path (lean-path.ts) makes no error object (and no stack trace) per
 * failed call, which an outage answers by the thousand.
 */
export function statusOfError(error: unknown, method: string, logger: Logger): { code: Status; details: string } {
  if (error instanceof ServerError) return { code: error.code, details: error.details };
  if (error instanceof InvalidArgumentError) return { code: Status.INVALID_ARGUMENT, details: error.message };
  if (error instanceof PolicyNotFoundError || error instanceof NotFoundError) return { code: Status.NOT_FOUND, details: error.message };
  if (error instanceof LeaseNotHeldError) return { code: Status.NOT_FOUND, details: error.message };
  if (error instanceof NoConcurrencyLimitError || error instanceof FailedPreconditionError) return { code: Status.FAILED_PRECONDITION, details: error.message };
  if (error instanceof PermissionDeniedError) return { code: Status.PERMISSION_DENIED, details: error.message };
  if (error instanceof StoreUnavailableError) {
    // An outage, not a bug: what happened, without a stack trace per call.
    logger.warn({ method, cause: describeCause(error.cause) }, 'quota store unavailable');
    return { code: Status.UNAVAILABLE, details: error.message };
  }
  logger.error({ method, err: error }, 'unexpected error');
  return { code: Status.INTERNAL, details: 'internal error' };
}

/** The store's trouble in one line: the innermost message (a timeout, a refused connection). */
function describeCause(cause: unknown): string {
  let inner = cause;
  while (inner instanceof Error && inner.cause !== undefined) inner = inner.cause;
  return inner instanceof Error ? inner.message : String(inner);
}
