import { Status } from 'nice-grpc';

/**
 * The service refused the request itself: a bug in the caller (bad input,
 * unknown policy) or in the deployment (credentials, method missing). The
 * failure policy never applies to these, so a typo cannot fail open.
 */
export class QuotaRequestError extends Error {
  override name = 'QuotaRequestError';
  constructor(
    /** The gRPC status code the service answered. */
    readonly code: Status,
    /** The service's message; it names the field at fault, e.g. "cost: must not be negative, got -1". */
    readonly details: string,
  ) {
    super(`${Status[code]}: ${details}`);
  }
}

/** INVALID_ARGUMENT: `details` starts with the field at fault. */
export class QuotaInvalidArgumentError extends QuotaRequestError {
  override name = 'QuotaInvalidArgumentError';
}

/** NOT_FOUND: the service has no policy of that name. */
export class QuotaPolicyNotFoundError extends QuotaRequestError {
  override name = 'QuotaPolicyNotFoundError';
}

/** Codes that mean "the caller asked wrongly"; everything else means "the service could not decide". */
const CALLER_BUGS = new Set<Status>([
  Status.INVALID_ARGUMENT,
  Status.NOT_FOUND,
  Status.OUT_OF_RANGE,
  Status.FAILED_PRECONDITION,
  Status.ALREADY_EXISTS,
  Status.UNAUTHENTICATED,
  Status.PERMISSION_DENIED,
  Status.UNIMPLEMENTED,
]);

/** The typed error for a caller-bug status, or undefined when the status means "unavailable". */
export function requestError(code: Status, details: string): QuotaRequestError | undefined {
  if (!CALLER_BUGS.has(code)) return undefined;
  if (code === Status.INVALID_ARGUMENT) return new QuotaInvalidArgumentError(code, details);
  if (code === Status.NOT_FOUND) return new QuotaPolicyNotFoundError(code, details);
  return new QuotaRequestError(code, details);
}
