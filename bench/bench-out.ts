import { writeFileSync } from 'node:fs';

/**
 * `make bench` (bench/suite/main.ts) runs each bench as a child and names a file
 * in BENCH_OUT where the bench leaves its figures as JSON, for the report writer
 * (bench/doc/). Run by hand, BENCH_OUT is unset and nothing is written: the
 * bench's printed tables are its output.
 */
export function writeBenchOut(figures: unknown): void {
  const path = process.env['BENCH_OUT'];
  if (path === undefined || path === '') return;
  writeFileSync(path, `${JSON.stringify(figures)}\n`);
}
