// `make bench-report`: writes docs/benchmarks.md and its plots again from the
// results of the last `make bench` / `make bench-quick`, without measuring.
//
//   npx tsx bench/doc/main.ts [docs/benchmarks.json]
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseResults } from './results.js';
import { writeReport } from './write-report.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const file = process.argv[2] ?? join('docs', 'benchmarks.json');

try {
  const text = await readFile(join(REPO_ROOT, file), 'utf8').catch(() => {
    throw new Error(`${file}: no results yet; run make bench or make bench-quick first`);
  });
  const written = await writeReport(parseResults(text, file), REPO_ROOT);
  process.stdout.write(`wrote ${written.join(', ')} from ${file}\n`);
} catch (error) {
  process.stderr.write(`bench-report: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
