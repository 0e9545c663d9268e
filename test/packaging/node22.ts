import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Where scripts/ensure-node22.mjs (run by `make test`) installs Node 22 from the npm package node@22. */
export const NODE22_PATH = join(import.meta.dirname, '..', '..', '.tmp', 'node22', 'node_modules', 'node', 'bin', 'node');

/**
 * The Node 22 binary the packaging test runs the consumer on. Missing is a failure,
 * not a skip: a run without it would claim Node 22 support it never checked.
 */
export function node22Binary(): string {
  const hint = 'run `make test` (its node22 target runs scripts/ensure-node22.mjs, which installs it) or `node scripts/ensure-node22.mjs`';
  if (!existsSync(NODE22_PATH)) throw new Error(`Node 22 not found at ${NODE22_PATH}: ${hint}`);
  const version = spawnSync(NODE22_PATH, ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? '';
  if (!/^v22\./.test(version)) throw new Error(`${NODE22_PATH} is ${version || 'not runnable'}, not Node 22: ${hint}`);
  return NODE22_PATH;
}
