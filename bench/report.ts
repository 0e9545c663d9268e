import type { LoadResult } from './load.js';
import { median } from './stats.js';

export type Kind = 'noop' | 'service';

/** The issue's target: the service sustains at least this share of the no-op server's unary throughput. */
export const TARGET_RATIO = 0.6;

export interface Round {
  round: number;
  kind: Kind;
  result: LoadResult;
}

export interface Summary {
  kind: Kind;
  decisionsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  calls: number;
  allowedShare: number;
  errors: number;
}

/** Per kind, the median over rounds of each figure (medians resist the odd round a noisy neighbour spoiled). */
export function summarize(rounds: readonly Round[], kind: Kind): Summary {
  const mine = rounds.filter((r) => r.kind === kind).map((r) => r.result);
  const calls = mine.reduce((sum, r) => sum + r.calls, 0);
  return {
    kind,
    decisionsPerSecond: median(mine.map((r) => r.decisionsPerSecond)),
    p50Ms: median(mine.map((r) => r.p50Ms)),
    p95Ms: median(mine.map((r) => r.p95Ms)),
    p99Ms: median(mine.map((r) => r.p99Ms)),
    calls,
    allowedShare: calls === 0 ? 0 : mine.reduce((sum, r) => sum + r.allowed, 0) / calls,
    errors: mine.reduce((sum, r) => sum + r.errors, 0),
  };
}

/** Service rounds divided by the no-op rounds they alternated with, round by round. */
export function roundRatios(rounds: readonly Round[]): number[] {
  const ratios: number[] = [];
  for (const service of rounds.filter((r) => r.kind === 'service')) {
    const noop = rounds.find((r) => r.kind === 'noop' && r.round === service.round);
    if (noop !== undefined && noop.result.decisionsPerSecond > 0) {
      ratios.push(service.result.decisionsPerSecond / noop.result.decisionsPerSecond);
    }
  }
  return ratios;
}

export function formatRoundLine(r: Round): string {
  const x = r.result;
  const errors = x.errors > 0 ? `  errors=${x.errors} (${x.firstError ?? ''})` : '';
  return `round ${r.round} ${r.kind.padEnd(7)} ${fmt(x.decisionsPerSecond, 0).padStart(8)} decisions/s  p50 ${fmt(x.p50Ms, 2)} ms  p95 ${fmt(x.p95Ms, 2)} ms  p99 ${fmt(x.p99Ms, 2)} ms  (${x.calls} calls)${errors}`;
}

/** A Markdown table, so the output can be pasted into docs/benchmarks.md as printed. */
export function formatTable(summaries: readonly Summary[]): string {
  const header = ['kind', 'decisions/s', 'p50 (ms)', 'p95 (ms)', 'p99 (ms)', 'calls', 'allowed', 'errors'];
  const rows = summaries.map((s) => [
    s.kind,
    fmt(s.decisionsPerSecond, 0),
    fmt(s.p50Ms, 2),
    fmt(s.p95Ms, 2),
    fmt(s.p99Ms, 2),
    String(s.calls),
    `${fmt(s.allowedShare * 100, 1)}%`,
    String(s.errors),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

export function formatRatio(noop: Summary, service: Summary, perRound: readonly number[]): string {
  const ratio = service.decisionsPerSecond / noop.decisionsPerSecond;
  const met = ratio >= TARGET_RATIO;
  return [
    `ratio service/noop (median decisions/s): ${fmt(ratio, 2)}  target >= ${TARGET_RATIO}: ${met ? 'MET' : 'NOT MET'}`,
    `per-round ratios: ${perRound.map((r) => fmt(r, 2)).join(', ')}`,
  ].join('\n');
}

function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}
