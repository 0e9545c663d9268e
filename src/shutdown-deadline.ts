import { writeSync } from 'node:fs';

/** Time allowed after the grace period for closing the store and exiting. */
export const SHUTDOWN_MARGIN_MS = 3_000;

/**
 * The last resort of a shutdown: whatever step hangs (a connection a server keeps
 * waiting for, a store that never closes), the process ends `graceMs` plus the margin
 * after the signal, with exit code 1 and one line on stderr. Unreferenced, it never
 * keeps a process alive that has nothing else to do.
 */
export function armShutdownDeadline(graceMs: number): void {
  setTimeout(expire, graceMs + SHUTDOWN_MARGIN_MS, graceMs).unref();
}

function expire(graceMs: number): void {
  try {
    writeSync(
      2,
      `quota-service: shutdown not finished ${graceMs + SHUTDOWN_MARGIN_MS} ms after the signal (QUOTA_SHUTDOWN_GRACE_MS ${graceMs} + ${SHUTDOWN_MARGIN_MS}): exiting with code 1\n`,
    );
  } catch {
    // stderr is closed: the exit code still says it.
  }
  process.exit(1);
}
