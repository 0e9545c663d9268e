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

export class PolicyNotFoundError extends QuotaError {
  override name = 'PolicyNotFoundError';
  constructor(readonly policy: string) {
    super(`policy: no policy named ${JSON.stringify(policy)}`);
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
 * `value` as an Error: the one form the batch paths (allowEach, decideGroups,
 * the script batcher's runEach) use for "this request failed" next to answers.
 */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
