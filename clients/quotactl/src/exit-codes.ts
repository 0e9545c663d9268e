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
