import { median } from '../stats.js';

/** One figure of one revision, a value per step run: the i-th of A and the i-th of B were measured back to back. */
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
   * A markdown table: each metric's median for A and for B and B / A of the
   * medians; then the pairs (A and B measured back to back, so both saw the
   * machine alike): their ratios' median and range, and the verdict, which
   * names a side only when the pairs favour it beyond chance (else the change
   * is within what the machine's drift does between pairs); and every sample.
   */
  table(nameA: string, nameB: string): string {
    const lines = [
      `| metric | ${nameA} | ${nameB} | B / A | pairs: B / A (lowest–highest) | verdict | samples A | samples B |`,
      '|---|---:|---:|---:|---:|---|---|---|',
    ];
    for (const row of this.rows.values()) {
      const ratios = pairRatios(row);
      const spread = ratios.length === 0 ? 'n/a' : `${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`;
      lines.push(
        `| ${row.metric} | ${figure(median(row.a))} | ${figure(median(row.b))} | ${ratioOfMedians(row.a, row.b)} | ${spread} | ${verdict(ratios, row.higherIsBetter)} | ${row.a.map(figure).join(' ')} | ${row.b.map(figure).join(' ')} |`,
      );
    }
    return lines.join('\n');
  }
}

/** B / A of each pair of samples taken back to back. */
function pairRatios(row: Samples): number[] {
  return row.b.slice(0, row.a.length).map((b, i) => b / row.a[i]!);
}

/**
 * A side, when the pairs favour it beyond chance: an exact two-sided sign test
 * (pairs that tie are left out) below 0.05, which takes at least 6 pairs.
 */
function verdict(ratios: number[], higherIsBetter: boolean): string {
  const favouringB = ratios.filter((r) => r !== 1 && r > 1 === higherIsBetter).length;
  const favouringA = ratios.filter((r) => r !== 1 && r > 1 !== higherIsBetter).length;
  const p = signTest(favouringB, favouringA);
  const counted = `${favouringB} of ${favouringB + favouringA} pairs favour B, p = ${p.toPrecision(2)}`;
  if (p >= 0.05) return `unclear (${counted})`;
  return `${favouringB > favouringA ? 'B better' : 'B worse'} (${counted})`;
}

/** The two-sided p-value of k and m outcomes of a fair coin: twice the chance of a split at least as uneven. */
export function signTest(k: number, m: number): number {
  const n = k + m;
  let tail = 0;
  let ways = 1; // n choose i, from i = 0
  for (let i = 0; i <= Math.min(k, m); i++) {
    tail += ways;
    ways = (ways * (n - i)) / (i + 1);
  }
  return Math.min(1, (2 * tail) / 2 ** n);
}

/** Three significant digits at most, whole numbers whole. */
function figure(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return Math.round(value).toString();
  return Number(value.toPrecision(3)).toString();
}

/** B / A of the medians, or n/a when a side has no samples (a figure an older revision does not report). */
function ratioOfMedians(a: readonly number[], b: readonly number[]): string {
  const ratio = median(b) / median(a);
  return Number.isFinite(ratio) ? ratio.toFixed(3) : 'n/a';
}
