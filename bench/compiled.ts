import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The bench's server children run compiled JavaScript, as production does
 * (`make run`: tsc, then `node dist/src/main.js`), not TypeScript through the
 * tsx loader: tsx compiles with esbuild's keepNames, which wraps every function
 * and closure the service creates per request in a `__name(...)` call, a cost
 * production never pays. tsconfig.bench.json compiles src/, the order API
 * example, bench/servers/ and bench/service-path.ts into OUT_DIR (incremental,
 * so a second bench starts faster); the packages in clients/ run from their
 * own builds (`make bench` builds them first).
 */
export const OUT_DIR = '.tmp/bench-dist';

let compiled: Promise<void> | undefined;

/** Compiles once per bench process; every child of the run uses the same build. */
export function compileServers(repoRoot: string): Promise<void> {
  compiled ??= (async () => {
    const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
    try {
      await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.bench.json'], { cwd: repoRoot, maxBuffer: 16 * 2 ** 20 });
    } catch (error) {
      const { stdout } = error as { stdout?: string };
      throw new Error(`bench: tsc -p tsconfig.bench.json failed:\n${stdout ?? String(error)}`);
    }
  })();
  return compiled;
}
