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

/** NOT_FOUND from Settle: no reservation with that request_id for this policy and identity (never made, expired, or another identity's). */
export class QuotaReservationNotFoundError extends QuotaRequestError {
  override name = 'QuotaReservationNotFoundError';
}

/** Why a lease was lost: the service no longer held it, or it could not be renewed before it expired. */
export type LeaseLossReason = 'not_held' | 'expired' | 'refused';

/**
 * A lease's holder lost it: the work it covered is no longer counted against the
 * concurrency limit, so another caller may start. `lease.signal` aborts with it.
 */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor(
    /** 'not_held': the service answered that the lease is not held (it expired or was released); 'expired': it could not be renewed before it expired; 'refused': the service refused the renewal itself (`cause`). */
    readonly reason: LeaseLossReason,
    readonly policy: string,
    readonly requestId: string,
    options?: { cause?: unknown },
  ) {
    super(
      `lease ${requestId} of policy ${policy} was lost: ${
        reason === 'not_held'
          ? 'the quota service no longer holds it'
          : reason === 'expired'
            ? 'it could not be renewed before it expired'
            : 'the quota service refused to renew it'
      }`,
      options,
    );
  }
}

/** The typed error a Settle failure means, or undefined when the status means "unavailable". */
export function settleError(code: Status, details: string): QuotaRequestError | undefined {
  // NOT_FOUND names either the policy ("policy: ...") or the reservation.
  if (code === Status.NOT_FOUND && !details.startsWith('policy:')) return new QuotaReservationNotFoundError(code, details);
  return requestError(code, details);
}
