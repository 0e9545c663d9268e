import type { ChildProcess } from 'node:child_process';

/** A child process that a test or bench run started and must not leave behind. */
export interface OwnedChild {
  /** Resolves when the child has exited, however that happened. */
  readonly exited: Promise<void>;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs: number): Promise<void>;
}

const owned = new Set<ChildProcess>();
// Last line of defence: whatever ends the run, no owned child survives it.
process.once('exit', () => {
  for (const child of owned) child.kill('SIGKILL');
});

/** Takes ownership of a just-spawned child. */
export function own(child: ChildProcess): OwnedChild {
  owned.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      owned.delete(child);
      resolve();
    }),
  );
  return {
    exited,
    async stop(graceMs) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}
