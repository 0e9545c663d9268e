// The lifecycle every bench entry point shares: whatever way the bench ends
// (done, failed, a signal, the watchdog), stop what it started, newest first,
// then exit with its code, so a bench never leaves a server or Redis behind.

export type Cleanup = () => Promise<void> | void;

export interface BenchRun {
  /** Registers something to stop when the bench ends. */
  onCleanup(stop: Cleanup): void;
  /** Gives up (exit 1) after `ms`, so a stuck child cannot hang `make bench`. */
  watchdog(ms: number): void;
}

/** Runs `main` (its result is the exit code) inside that lifecycle. */
export function benchMain(main: (run: BenchRun) => Promise<number>): void {
  const cleanups: Cleanup[] = [];
  let cleaningUp: Promise<void> | undefined;
  const cleanup = (): Promise<void> =>
    (cleaningUp ??= (async () => {
      for (const stop of cleanups.reverse()) {
        await Promise.resolve()
          .then(stop)
          .catch((error: unknown) => process.stderr.write(`cleanup: ${String(error)}\n`));
      }
    })());
  const exitAfterCleanup = (code: number): void => void cleanup().finally(() => process.exit(code));

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    process.once(signal, () => {
      process.stderr.write(`bench: ${signal}, stopping what it started\n`);
      exitAfterCleanup(code);
    });
  }
  const run: BenchRun = {
    onCleanup: (stop) => void cleanups.push(stop),
    watchdog(ms) {
      const timer = setTimeout(() => {
        process.stderr.write(`bench: still running after ${ms} ms, giving up\n`);
        exitAfterCleanup(1);
      }, ms);
      cleanups.push(() => clearTimeout(timer));
    },
  };
  main(run).then(exitAfterCleanup, (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    exitAfterCleanup(1);
  });
}
