import { createInterface } from 'node:readline';
import { formatCounters, readCounters } from '../process-counters.js';

/**
 * The contract between a server child and bench/children.ts: announce the bound
 * port as one `port=<n>` line on stdout, then live until told to stop. A
 * `counters` line on stdin is answered with one line of the child's event-loop
 * turns and heap allocations so far (bench/process-counters.ts).
 *
 * The child stops on SIGTERM/SIGINT and also when its stdin closes: the parent
 * holds the other end of that pipe, so even if the parent dies without cleaning
 * up (SIGKILL, crash) the pipe closes and no server outlives the bench.
 * Stopping goes through process.exit so that --cpu-prof gets to write its profile.
 */
export function serveUntilParentLeaves(port: number, shutdown: () => Promise<void>): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // Never hang on a slow drain: the bench is over either way.
    const force = setTimeout(() => process.exit(0), 2_000);
    force.unref();
    shutdown()
      .catch((error: unknown) => process.stderr.write(`shutdown failed: ${String(error)}\n`))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('close', stop);
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line === 'counters') process.stdout.write(`${formatCounters(readCounters())}\n`);
  });
  process.stdout.write(`port=${port}\n`);
}

/** Child entry points report a failed start on stderr and exit non-zero; the parent shows that text. */
export function failStart(error: unknown): never {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
}
