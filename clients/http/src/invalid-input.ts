import { InvalidArgumentError } from '@quota-service/core';

/** The body of the 400 for input the quota service refused. */
export interface InvalidRequestBody {
  error: 'invalid_request';
  /** `<field>: not accepted by the rate limiter`, e.g. `identity.ip: ...`. */
  message: string;
}

/** gRPC INVALID_ARGUMENT. */
const INVALID_ARGUMENT = 3;

/**
 * The field at the start of a quota service message (`cost`, `request_id`,
 * `policy`, `identity`, `identity.<part>`), before its `: `. Nothing else of
 * the message is repeated: it may quote what the request carried.
 */
const FIELD = /^[a-z][a-z_]{0,31}(?:\.[a-z0-9][a-z0-9_.-]{0,63})?(?=: )/;

/**
 * The 400 body for an argument error of the quota service, or undefined for
 * any other error. An argument error is core's InvalidArgumentError (a
 * LocalLimiter, or a decider of your own that validates like one) or an error
 * with gRPC code INVALID_ARGUMENT and `details` (the quota client's
 * QuotaInvalidArgumentError). The body names the field at fault, never the
 * service's message.
 */
export function invalidInputBody(error: unknown): InvalidRequestBody | undefined {
  let message: string;
  if (error instanceof InvalidArgumentError) message = error.message;
  else if (isInvalidArgumentStatus(error)) message = error.details;
  else return undefined;
  const field = FIELD.exec(message)?.[0] ?? 'request';
  return { error: 'invalid_request', message: `${field}: not accepted by the rate limiter` };
}

function isInvalidArgumentStatus(error: unknown): error is Error & { details: string } {
  if (!(error instanceof Error)) return false;
  const { code, details } = error as Error & { code?: unknown; details?: unknown };
  return code === INVALID_ARGUMENT && typeof details === 'string';
}
