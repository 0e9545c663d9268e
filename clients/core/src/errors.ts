/**
 * Errors the engine throws on purpose. The gRPC layer maps each to a status
 * code in one place (src/grpc/error-middleware.ts); anything else is a bug and
 * becomes INTERNAL without leaking details.
 */
export class QuotaError extends Error {
  override name = 'QuotaError';
}

/** Bad input; `field` names the request field at fault. */
export class InvalidArgumentError extends QuotaError {
  override name = 'InvalidArgumentError';
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`${field}: ${detail}`);
  }
}

/** How much of a caller's value an error message repeats. */
const ECHO_CHARS = 64;

/**
 * `value` quoted for an error message, at most ECHO_CHARS characters of it:
 * a message travels back in gRPC trailers, and repeating a caller's megabyte
 * there stalls the caller's whole connection.
 */
export function quoteCapped(value: string): string {
  if (value.length <= ECHO_CHARS) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, ECHO_CHARS)).slice(0, -1)}…" (${value.length} characters)`;
}

export class PolicyNotFoundError extends QuotaError {
  override name = 'PolicyNotFoundError';
  constructor(readonly policy: string) {
    super(`policy: no policy named ${quoteCapped(policy)}`);
  }
}

/** Release or Renew on a policy without a concurrency limit (FAILED_PRECONDITION): it holds no leases. */
export class NoConcurrencyLimitError extends QuotaError {
  override name = 'NoConcurrencyLimitError';
  constructor(readonly policy: string) {
    super(`policy: policy ${quoteCapped(policy)} has no concurrency limit, so it holds no leases to release or renew`);
  }
}

/** Renew of a lease that is no longer held (NOT_FOUND): released, expired, or never acquired. Its holder lost it. */
export class LeaseNotHeldError extends QuotaError {
  override name = 'LeaseNotHeldError';
  constructor(policy: string) {
    super(`request_id: no lease held under this request_id for this identity in policy ${quoteCapped(policy)} (released, expired, or never acquired)`);
  }
}

/** The store could not be asked (connection down, timeout, failover in progress). */
export class StoreUnavailableError extends QuotaError {
  override name = 'StoreUnavailableError';
  constructor(cause: unknown) {
    super('quota store unavailable', { cause });
  }
}

/**
 * `value` as an Error: the one form the batch paths (allowEach, QuotaStore.decide,
 * the script batcher's runEach) use for "this request failed" next to answers.
 */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** Something the request names does not exist for its caller (a reservation's request_id, say): NOT_FOUND. */
export class NotFoundError extends QuotaError {
  override name = 'NotFoundError';
}

/** The request is well-formed but the state it needs is not there (settling a denied Allow): FAILED_PRECONDITION. */
export class FailedPreconditionError extends QuotaError {
  override name = 'FailedPreconditionError';
}

/** The caller is known but may not do this (an admin acting outside its policies): PERMISSION_DENIED. */
export class PermissionDeniedError extends QuotaError {
  override name = 'PermissionDeniedError';
}
