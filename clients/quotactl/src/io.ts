/** A stream quotactl writes to: process.stdout / process.stderr, or a test's buffer. */
export interface CliStream {
  write(text: string): unknown;
  /** True when a person is looking: tables, colour, in-place refresh and progress bars. */
  readonly isTTY?: boolean;
  /** The terminal's width, when it has one. */
  readonly columns?: number;
}

/**
 * Everything quotactl touches outside itself, so a test can run it in-process
 * with its own streams, environment and Ctrl-C.
 */
export interface CliIo {
  readonly stdout: CliStream;
  readonly stderr: CliStream;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The working directory files given on the command line are read from. */
  readonly cwd: string;
  /** Aborted on Ctrl-C (SIGINT) or SIGTERM: `watch` and `bench` stop and report. */
  readonly interrupt: AbortSignal;
}
