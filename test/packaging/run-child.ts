import { spawn } from 'node:child_process';
import { own } from '../support/owned-child.js';

export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Each packaging test is well under a few seconds; the ceilings only turn a hang into a failure with its output. */
export const TEST_TIMEOUT_MS = 120_000;
export const RUN_TIMEOUT_MS = 60_000;

/** Runs a command to its end (killed after `timeoutMs`), never rejecting on a non-zero exit: the caller asserts. */
export async function runChild(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<ChildResult> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const owned = own(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => {
    stderr += `\n[killed after ${options.timeoutMs} ms]`;
    child.kill('SIGKILL');
  }, options.timeoutMs);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode) => resolve(exitCode));
  }).finally(() => clearTimeout(timer));
  await owned.exited;
  return { code, stdout, stderr };
}

/** Throws with everything the command wrote unless it exited 0. */
export async function runOk(command: string, args: readonly string[], options: Parameters<typeof runChild>[2]): Promise<ChildResult> {
  const result = await runChild(command, args, options);
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(' ')} (in ${options.cwd}) exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
  }
  return result;
}

/**
 * The environment for npm run from a test: the parent's without what npm set for
 * the script that started vitest (npm_config_local_prefix would point a nested npm
 * at the repository; npm_package_* and npm_lifecycle_* describe the root package).
 * Other npm_config_* stay: they are the user's registry, cache and CA settings.
 */
export function npmEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !(/^npm_/i.test(key) && !/^npm_config_/i.test(key)) && !/^npm_config_local_prefix$/i.test(key)),
  );
}
