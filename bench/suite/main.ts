// `make bench` and `make bench-quick`: runs the benches one after the other,
// each in its own process, keeps what each measured in a results file, then
// writes docs/benchmarks.md and its plots (docs/img/) from that file
// (bench/doc/). A progress line on stderr says where the run is.
//
//   npx tsx bench/suite/main.ts [--quick] [--only limiters,cluster] [--results docs/benchmarks.json]
//
// BENCH_NOTE (environment): what else ran on the machine, for the report's
// machine line, e.g. BENCH_NOTE="other test suites running".
// A step not run this time keeps its earlier figures (and their date) from the
// results file, so a quick run updates the plots and leaves the rest. The results
// file is committed beside the report it is written from (docs/benchmarks.json).
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { OwnedChild } from '../../test/support/owned-child.js';
import { parseResults, type Results } from '../doc/results.js';
import { writeReport } from '../doc/write-report.js';
import { describeMachine } from './machine.js';
import { Progress } from './progress.js';
import { runStep } from './run-step.js';
import { planSteps, stepCommand } from './steps.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const USAGE = 'usage: npx tsx bench/suite/main.ts [--quick] [--only id,id] [--results docs/benchmarks.json]';

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      results: { type: 'string', default: join('docs', 'benchmarks.json') },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const profile = values.quick ? 'quick' : 'full';
  const steps = planSteps(
    profile,
    values.only?.split(',').map((id) => id.trim()),
  );
  const resultsFile = join(REPO_ROOT, values.results);
  // Each bench's raw output, for this run only.
  const outDir = join(REPO_ROOT, '.tmp', 'bench', 'out');
  await mkdir(outDir, { recursive: true });
  const results = await previousResults(resultsFile);
  const note = process.env['BENCH_NOTE']?.trim() ?? '';
  const target = profile === 'quick' ? 'make bench-quick' : 'make bench';

  const progress = new Progress();
  let current: OwnedChild | undefined;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    process.once(signal, () => {
      progress.log(`bench: ${signal}; stopping the running bench (it stops its own servers), keeping what is measured in ${values.results}`);
      void Promise.resolve(current?.stop(15_000)).finally(() => process.exit(code));
    });
  }

  const suiteStart = performance.now();
  const clock = () => {
    const s = Math.round((performance.now() - suiteStart) / 1000);
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  };
  const failed: string[] = [];
  for (const [index, step] of steps.entries()) {
    const head = `bench ${index + 1}/${steps.length} ${step.id}`;
    progress.update(`[${clock()}] ${head}: starting`);
    const machine = await describeMachine(note);
    const startedAt = new Date().toISOString();
    const outcome = await runStep(step, {
      repoRoot: REPO_ROOT,
      outDir,
      onLine: (line) => progress.update(`[${clock()}] ${head}: ${line.trim()}`),
      current: (child) => {
        current = child;
      },
    });
    results.steps[step.id] = {
      id: step.id,
      command: stepCommand(step),
      target,
      startedAt,
      seconds: Math.round(outcome.seconds),
      exitCode: outcome.exitCode,
      machine,
      ...(outcome.figures === undefined ? {} : { figures: outcome.figures }),
      output: outcome.output,
      ...(outcome.exitCode === 0 ? {} : { errorOutput: outcome.errorOutput }),
    };
    await saveResults(resultsFile, results);
    if (outcome.exitCode === 0) {
      progress.log(`[${clock()}] ${head}: done in ${Math.round(outcome.seconds)} s`);
    } else {
      failed.push(step.id);
      progress.log(`[${clock()}] ${head}: FAILED (exit ${outcome.exitCode}) after ${Math.round(outcome.seconds)} s\n${outcome.errorOutput}`);
    }
  }

  const written = await writeReport(results, REPO_ROOT);
  progress.log(`[${clock()}] wrote ${written.join(', ')} from ${values.results}`);
  if (failed.length > 0) {
    progress.log(`bench: ${failed.join(', ')} failed; docs/benchmarks.md says so where their figures would be`);
    return 1;
  }
  return 0;
}

/** The results file of earlier runs, or an empty one; a file this version cannot read is set aside, not trusted. */
async function previousResults(file: string): Promise<Results> {
  if (!existsSync(file)) return { version: 1, steps: {} };
  try {
    return parseResults(await readFile(file, 'utf8'), file);
  } catch (error) {
    await rename(file, `${file}.unreadable`);
    process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}; set aside as ${file}.unreadable, starting afresh\n`);
    return { version: 1, steps: {} };
  }
}

/** Written whole to a temporary file, then renamed: a run stopped midway never leaves half a file. */
async function saveResults(file: string, results: Results): Promise<void> {
  await writeFile(`${file}.tmp`, `${JSON.stringify(results, null, 1)}\n`);
  await rename(`${file}.tmp`, file);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
