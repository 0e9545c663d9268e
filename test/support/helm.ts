import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** The helm the chart tests run: `helm` on PATH, else the one scripts/ensure-helm.mjs (run by `make test`) placed in .tmp/helm. */
export function helmBinary(): string {
  if (spawnSync('helm', ['version', '--short']).status === 0) return 'helm';
  const local = join(import.meta.dirname, '..', '..', '.tmp', 'helm', 'helm');
  if (existsSync(local)) return local;
  throw new Error('no helm binary: run `make test` (it runs scripts/ensure-helm.mjs) or install helm 3.14+');
}

/** Runs helm; throws with its output when it exits non-zero. */
export function helm(args: readonly string[]): string {
  try {
    return execFileSync(helmBinary(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`helm ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}
