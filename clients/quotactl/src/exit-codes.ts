import { ClientError, Status } from 'nice-grpc';

/**
 * quotactl's exit statuses (README.md of this package): scripts branch on
 * these, so they never change meaning.
 */
export const EXIT = {
  /** Allowed; or the command did what it was asked. */
  ok: 0,
  /** Denied (`allow`); or the policy file is invalid (`validate`). */
  denied: 1,
  /** Bad usage: unknown command or option, a malformed argument, a file that cannot be read. */
  usage: 2,
  /** The service could not be reached or did not answer in time (or its store is down). */
  unavailable: 3,
  /** The service refused the credentials: no or unknown token, or a policy the token may not use. */
  refused: 4,
  /** The service refused the request: unknown policy, bad identity or cost, a method it lacks. */
  rejected: 5,
  /** quotactl itself failed: a bug. */
  failed: 6,
  /** Ctrl-C stopped a call (watch and bench stop normally instead: 0). */
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure quotactl reports in one line on stderr and exits with `code`. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly code: ExitCode,
  ) {
    super(message);
  }
}

/** A malformed argument or option: exit status 2, the message names it. */
export const usageError = (message: string) => new CliError(message, EXIT.usage);

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
