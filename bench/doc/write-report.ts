import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildReport } from './build-report.js';
import { renderSvg } from './render-svg.js';
import type { Results } from './results.js';

/**
 * Writes docs/benchmarks.md and its plots (docs/img/bench-*.svg) under
 * `repoRoot`; a plot of an earlier report that this one no longer draws (its
 * bench failed, or the report changed) is removed, so no stale plot stays
 * beside the page. Returns the files written.
 */
export async function writeReport(results: Results, repoRoot: string): Promise<string[]> {
  const report = buildReport(results);
  const imgDir = join(repoRoot, 'docs', 'img');
  await mkdir(imgDir, { recursive: true });
  const written: string[] = [];
  for (const chart of report.charts) {
    await writeFile(join(imgDir, chart.file), await renderSvg(chart.spec));
    written.push(`docs/img/${chart.file}`);
  }
  const drawn = new Set(report.charts.map((c) => c.file));
  for (const file of await readdir(imgDir)) {
    if (file.startsWith('bench-') && file.endsWith('.svg') && !drawn.has(file)) await rm(join(imgDir, file));
  }
  await writeFile(join(repoRoot, 'docs', 'benchmarks.md'), report.markdown);
  return ['docs/benchmarks.md', ...written];
}
