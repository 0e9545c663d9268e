import { ClientError, Status } from 'nice-grpc';
import { CliError, EXIT, type ExitCode } from './exit-codes.js';

const REFUSED = new Set<Status>([Status.UNAUTHENTICATED, Status.PERMISSION_DENIED]);
const UNAVAILABLE = new Set<Status>([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.RESOURCE_EXHAUSTED, Status.CANCELLED, Status.ABORTED]);

/** The exit status for a gRPC error the service (or the channel) answered. */
export function exitCodeOf(code: Status): ExitCode {
  if (REFUSED.has(code)) return EXIT.refused;
  if (UNAVAILABLE.has(code)) return EXIT.unavailable;
  return EXIT.rejected;
}

/**
 * A call's failure as a CliError: the status name and the service's own
 * message (which names the field at fault), or the timeout it ran out of.
 */
export function callFailure(error: unknown, address: string, timeoutMs: number): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof ClientError) {
    const where = error.code === Status.UNAVAILABLE ? ` (${address})` : '';
    return new CliError(`${Status[error.code]}: ${error.details}${where}`, exitCodeOf(error.code));
  }
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return new CliError(`DEADLINE_EXCEEDED: no answer from ${address} within ${timeoutMs} ms (--timeout)`, EXIT.unavailable);
  }
  throw error;
}
