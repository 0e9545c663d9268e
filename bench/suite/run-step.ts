import { spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { own, type OwnedChild } from '../../test/support/owned-child.js';
import type { StepPlan } from './steps.js';

export interface StepOutcome {
  exitCode: number;
  seconds: number;
  /** Everything the bench printed on stdout. */
  output: string;
  /** The end of its stderr (warnings, the reason it failed). */
  errorOutput: string;
  /** What it left in BENCH_OUT, if anything. */
  figures: unknown;
}

/** A bench that overran its own watchdog by this much is stopped from here. */
const STEP_CEILING_MS = 40 * 60_000;
/** Time a stopped bench gets to stop its own servers and Redis before SIGKILL. */
const STOP_GRACE_MS = 15_000;

/**
 * Runs one bench as its own process, as `make` would (tsx, the packages'
 * sources), with BENCH_OUT naming a file for its figures. `onLine` sees each
 * stdout line as it comes (the progress line); `current` lets the suite stop
 * the bench, which then stops what it started.
 */
export async function runStep(
  step: StepPlan,
  options: { repoRoot: string; outDir: string; onLine: (line: string) => void; current: (child: OwnedChild | undefined) => void },
): Promise<StepOutcome> {
  const figuresFile = join(options.outDir, `${step.id}.json`);
  await rm(figuresFile, { force: true });
  const started = performance.now();
  const child = spawn(process.execPath, ['--conditions=@quota-service/source', '--import', 'tsx', join('bench', step.file), ...step.args], {
    cwd: options.repoRoot,
    env: { ...process.env, BENCH_OUT: figuresFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const owned = own(child);
  options.current(owned);
  const ceiling = setTimeout(() => void owned.stop(STOP_GRACE_MS), STEP_CEILING_MS);

  let output = '';
  let partial = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') options.onLine(line);
  });
  let errorOutput = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    errorOutput = (errorOutput + chunk).slice(-4_000);
  });
  const exitCode = await new Promise<number>((resolve) => {
    child.once('error', (error) => {
      errorOutput += `\n${error.message}`;
      resolve(1);
    });
    child.once('close', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
  clearTimeout(ceiling);
  options.current(undefined);
  const figures = await readFile(figuresFile, 'utf8').then(
    (text) => JSON.parse(text) as unknown,
    () => undefined,
  );
  return { exitCode, seconds: (performance.now() - started) / 1000, output, errorOutput: errorOutput.trim(), figures };
}
