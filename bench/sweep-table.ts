import { median } from './stats.js';
import type { SweepPoint } from './sweep.js';

/** One kind at one concurrency: the median of each figure over the rounds. */
export interface SweepMedian {
  kind: string;
  concurrency: number;
  decisionsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  rounds: number;
  errors: number;
}

/** Medians per kind and concurrency, in the order the kinds are given, concurrencies ascending. */
export function sweepMedians(points: readonly SweepPoint[], kinds: readonly string[]): SweepMedian[] {
  const out: SweepMedian[] = [];
  const concurrencies = [...new Set(points.map((p) => p.concurrency))].sort((a, b) => a - b);
  for (const kind of kinds) {
    for (const concurrency of concurrencies) {
      const mine = points.filter((p) => p.kind === kind && p.concurrency === concurrency);
      if (mine.length === 0) continue;
      out.push({
        kind,
        concurrency,
        decisionsPerSecond: median(mine.map((p) => p.decisionsPerSecond)),
        p50Ms: median(mine.map((p) => p.p50Ms)),
        p99Ms: median(mine.map((p) => p.p99Ms)),
        rounds: mine.length,
        errors: mine.reduce((sum, p) => sum + p.errors, 0),
      });
    }
  }
  return out;
}

/** A markdown table: a row per kind, decisions/s (p99 ms) per concurrency. */
export function formatSweepTable(medians: readonly SweepMedian[], labels: ReadonlyMap<string, string>): string {
  const concurrencies = [...new Set(medians.map((m) => m.concurrency))].sort((a, b) => a - b);
  const kinds = [...new Set(medians.map((m) => m.kind))];
  const header = `| limiter | ${concurrencies.map((c) => `${c} in flight`).join(' | ')} |`;
  const rule = `|---|${concurrencies.map(() => '---:').join('|')}|`;
  const rows = kinds.map((kind) => {
    const cells = concurrencies.map((c) => {
      const m = medians.find((x) => x.kind === kind && x.concurrency === c);
      if (m === undefined) return '';
      const errors = m.errors > 0 ? `, ${m.errors} errors` : '';
      return `${Math.round(m.decisionsPerSecond).toLocaleString('en-US')} (p99 ${m.p99Ms.toFixed(1)} ms${errors})`;
    });
    return `| ${labels.get(kind) ?? kind} | ${cells.join(' | ')} |`;
  });
  return [header, rule, ...rows].join('\n');
}

/** "a / b" per concurrency, as a one-row table, from the medians. */
export function ratioRow(medians: readonly SweepMedian[], over: string, under: string, label: string): string {
  const concurrencies = [...new Set(medians.map((m) => m.concurrency))].sort((a, b) => a - b);
  const cells = concurrencies.map((c) => {
    const a = medians.find((m) => m.kind === over && m.concurrency === c);
    const b = medians.find((m) => m.kind === under && m.concurrency === c);
    return a === undefined || b === undefined || b.decisionsPerSecond === 0 ? '' : `${(a.decisionsPerSecond / b.decisionsPerSecond).toFixed(2)}×`;
  });
  return `| ${label} | ${cells.join(' | ')} |`;
}
