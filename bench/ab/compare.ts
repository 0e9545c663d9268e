import { median } from '../stats.js';

/** One figure of one revision, a value per round and instance. */
export interface Samples {
  readonly metric: string;
  /** Whether more is better (decisions/s) or worse (latency, CPU). */
  readonly higherIsBetter: boolean;
  readonly a: number[];
  readonly b: number[];
}

/** Collects the samples of each metric in the order they were first added. */
export class Comparison {
  private readonly rows = new Map<string, Samples>();

  add(metric: string, higherIsBetter: boolean, side: 'a' | 'b', value: number): void {
    let row = this.rows.get(metric);
    if (row === undefined) {
      row = { metric, higherIsBetter, a: [], b: [] };
      this.rows.set(metric, row);
    }
    row[side].push(value);
  }

  /**
   * A markdown table: each metric's median for A and for B, B / A, whether B is
   * better by that, and every sample of each side (their spread is the noise).
   */
  table(nameA: string, nameB: string): string {
    const lines = [`| metric | ${nameA} | ${nameB} | B / A | samples A | samples B |`, '|---|---:|---:|---:|---|---|'];
    for (const row of this.rows.values()) {
      const a = median(row.a);
      const b = median(row.b);
      const ratio = b / a;
      const better = ratio === 1 ? '' : ratio > 1 === row.higherIsBetter ? ' (B better)' : ' (B worse)';
      lines.push(
        `| ${row.metric} | ${figure(a)} | ${figure(b)} | ${ratio.toFixed(3)}${better} | ${row.a.map(figure).join(' ')} | ${row.b.map(figure).join(' ')} |`,
      );
    }
    return lines.join('\n');
  }
}

/** Three significant digits at most, whole numbers whole. */
function figure(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return Math.round(value).toString();
  return Number(value.toPrecision(3)).toString();
}
