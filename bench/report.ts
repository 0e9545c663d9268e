import type { CpuSample } from './cpu.js';
import type { LoadResult } from './load.js';
import { median } from './stats.js';

/** noop/service: bench/run.ts; raw/unary/batched: bench/batch-run.ts; flexible: bench/flexible-run.ts. */
export type Kind = 'noop' | 'service' | 'raw' | 'unary' | 'calls' | 'batched' | 'flexible';

/** The issue's target: the service sustains at least this share of the no-op server's unary throughput. */
export const TARGET_RATIO = 0.6;

export interface Round {
  round: number;
  kind: Kind;
  result: LoadResult;
  /** CPU ms each party spent during the round. */
  cpu: CpuSample;
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
  /** CPU microseconds per answered call, summed over rounds: load driver, server process, Redis. */
  driverUsPerCall: number;
  serverUsPerCall: number;
  redisUsPerCall: number;
  /** Share of one core each party used over the measured rounds. */
  driverCores: number;
  serverCores: number;
  redisCores: number;
}

/** Per kind, the median over rounds of each figure (medians resist the odd round a noisy neighbour spoiled). */
export function summarize(rounds: readonly Round[], kind: Kind): Summary {
  const mine = rounds.filter((r) => r.kind === kind).map((r) => r.result);
  const calls = mine.reduce((sum, r) => sum + r.calls, 0);
  const cpu = rounds.filter((r) => r.kind === kind).map((r) => r.cpu);
  const wallMs = mine.reduce((sum, r) => sum + r.elapsedMs, 0);
  const total = (pick: (c: CpuSample) => number) => cpu.reduce((sum, c) => sum + pick(c), 0);
  const perCall = (pick: (c: CpuSample) => number) => (calls === 0 ? Number.NaN : (total(pick) * 1000) / calls);
  const cores = (pick: (c: CpuSample) => number) => (wallMs === 0 ? Number.NaN : total(pick) / wallMs);
  return {
    kind,
    decisionsPerSecond: median(mine.map((r) => r.decisionsPerSecond)),
    p50Ms: median(mine.map((r) => r.p50Ms)),
    p95Ms: median(mine.map((r) => r.p95Ms)),
    p99Ms: median(mine.map((r) => r.p99Ms)),
    calls,
    allowedShare: calls === 0 ? 0 : mine.reduce((sum, r) => sum + r.allowed, 0) / calls,
    errors: mine.reduce((sum, r) => sum + r.errors, 0),
    driverUsPerCall: perCall((c) => c.driverMs),
    serverUsPerCall: perCall((c) => c.serverMs),
    redisUsPerCall: perCall((c) => c.redisMs),
    driverCores: cores((c) => c.driverMs),
    serverCores: cores((c) => c.serverMs),
    redisCores: cores((c) => c.redisMs),
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

/** Markdown tables, so the output can be pasted into docs/benchmarks.md as printed. */
export function formatTable(summaries: readonly Summary[]): string {
  return markdown(
    ['kind', 'decisions/s', 'p50 (ms)', 'p95 (ms)', 'p99 (ms)', 'calls', 'allowed', 'errors'],
    summaries.map((s) => [
      s.kind,
      fmt(s.decisionsPerSecond, 0),
      fmt(s.p50Ms, 2),
      fmt(s.p95Ms, 2),
      fmt(s.p99Ms, 2),
      String(s.calls),
      `${fmt(s.allowedShare * 100, 1)}%`,
      String(s.errors),
    ]),
  );
}

/** Where the CPU went: per call, and as a share of one core over the measured rounds. */
export function formatCpuTable(summaries: readonly Summary[]): string {
  return markdown(
    ['kind', 'driver µs/call', 'server µs/call', 'redis µs/call', 'driver cores', 'server cores', 'redis cores'],
    summaries.map((s) => [
      s.kind,
      fmt(s.driverUsPerCall, 0),
      fmt(s.serverUsPerCall, 0),
      fmt(s.redisUsPerCall, 0),
      fmt(s.driverCores, 2),
      fmt(s.serverCores, 2),
      fmt(s.redisCores, 2),
    ]),
  );
}

function markdown(header: readonly string[], rows: readonly string[][]): string {
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
    // Each round's pair ran back to back, under much the same neighbours: their
    // median is a second view of the ratio, less swayed by one kind's lucky round.
    `per-round ratios: ${perRound.map((r) => fmt(r, 2)).join(', ')}  (median ${fmt(median(perRound), 2)})`,
  ].join('\n');
}

function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}
