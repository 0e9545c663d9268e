import { ClientError, Status } from 'nice-grpc';
import { CliError, EXIT, type ExitCode } from './exit-codes.js';
import { humanFieldError, unreachableReason, waited } from './human-messages.js';

const REFUSED = new Set<Status>([Status.UNAUTHENTICATED, Status.PERMISSION_DENIED]);
const UNAVAILABLE = new Set<Status>([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.RESOURCE_EXHAUSTED, Status.CANCELLED, Status.ABORTED]);

/** The exit status for a gRPC error the service (or the channel) answered. */
export function exitCodeOf(code: Status): ExitCode {
  if (REFUSED.has(code)) return EXIT.refused;
  if (UNAVAILABLE.has(code)) return EXIT.unavailable;
  return EXIT.rejected;
}

/**
 * A call's failure as a CliError, in words: the status name, then what
 * happened (the service could not be reached, and why; no answer in time,
 * and whether a connection was made at all) or the service's own message,
 * its field named as the quotactl option that sets it. `connected` tells
 * whether the channel had a connection when the call gave up.
 */
export function callFailure(error: unknown, address: string, timeoutMs: number, connected?: () => boolean): CliError {
  if (error instanceof CliError) return error;
  const timedOut = (): CliError =>
    new CliError(
      connected?.() === false
        ? `DEADLINE_EXCEEDED: could not connect to the service at ${address} within ${waited(timeoutMs)}: is the address right, and the service up?`
        : `DEADLINE_EXCEEDED: the service at ${address} did not answer within ${waited(timeoutMs)}`,
      EXIT.unavailable,
    );
  if (error instanceof ClientError) {
    if (error.code === Status.UNAVAILABLE) {
      const reason = unreachableReason(error.details);
      const message = reason === undefined ? `${error.details} (${address})` : `the service at ${address} could not be reached: ${reason}`;
      return new CliError(`UNAVAILABLE: ${message}`, EXIT.unavailable);
    }
    if (error.code === Status.DEADLINE_EXCEEDED) return timedOut();
    const details = error.code === Status.INVALID_ARGUMENT ? humanFieldError(error.details) : error.details;
    return new CliError(`${Status[error.code]}: ${details}`, exitCodeOf(error.code));
  }
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return timedOut();
  throw error;
}
