import { median } from '../stats.js';

/** One look at the service and Redis (bench/soak/sampler.ts). */
export interface Sample {
  /** Since the first load started (the measurement of the maximum), ms. */
  atMs: number;
  phase: 'measure' | 'load' | 'idle';
  /** Decisions answered so far, all phases. */
  decisions: number;
  /** Calls sent so far, all phases: answered, failed or in flight. Each may have written a remembered decision. */
  sent: number;
  /** Redis's estimate of the keys that have expired but are not deleted yet (INFO stats expired_stale_perc), 0..1. */
  stale: number;
  rssBytes: number;
  fds: number;
  keys: number;
  /** Keys with no expiry: none may exist, every quota key has a TTL. */
  keysWithoutTtl: number;
}

export interface SoakRun {
  samples: readonly Sample[];
  /** From the start of the soak's load: left out of the RSS and fd bars. */
  warmupMs: number;
  /** Keys that exist whatever the rate: one per user, two windows per tenant. */
  fixedKeys: number;
  /** How long a remembered decision may exist: request_id_ttl_ms, plus a sample interval (calls are counted per sample). */
  memoWindowMs: number;
  /**
   * The share of keys Redis lets sit expired but not yet deleted before its active
   * expiry works harder (10% at the default active-expire-effort): DBSIZE counts them.
   * Where Redis reports more (a CPU-starved expiry cycle), its own figure counts.
   */
  staleShare: number;
  /** The longest TTL seen at the end of the load, ms. */
  longestTtlMs: number;
  /** After the longest TTL, how long Redis may take to delete what expired. */
  idleGraceMs: number;
  /** Failed calls (errors or decisions not made by the service). */
  errors: number;
  /** Service log lines at level error or fatal. */
  errorLines: number;
  /** The service's exit code on SIGTERM at the end; undefined: it died before. */
  exitCode: number | null | undefined;
}

export interface Bar {
  name: string;
  pass: boolean;
  detail: string;
}

/**
 * Largest RSS growth after warm-up, from the first third of the samples to the
 * last. RSS under load is a band, not a line: the heap grows until a collection
 * (30-50 MiB at these rates), and V8 returns freed pages to the system only now
 * and then, so a floor may sit 20 MiB higher for minutes without anything being
 * kept alive. A leak raises the whole band; so the bar fails when both its floor
 * (the lowest sample) and its median grew by more than this.
 */
export const RSS_GROWTH_BAR = 0.1;
/** Open descriptors after warm-up may vary by this many (a connection being replaced). */
export const FD_SPREAD_BAR = 2;

const MiB = 2 ** 20;

/** The bars of `make soak`, judged from the samples of one run. */
export function judgeSoak(run: SoakRun): Bar[] {
  const loadStart = run.samples.find((s) => s.phase === 'load')?.atMs ?? 0;
  const settled = run.samples.filter((s) => s.phase === 'load' && s.atMs >= loadStart + run.warmupMs);
  const idle = run.samples.filter((s) => s.phase === 'idle');
  const loadEnd = run.samples.filter((s) => s.phase !== 'idle').at(-1);
  return [errorsBar(run, loadEnd?.decisions ?? 0), rssBar(run, settled), fdBar(settled), keysBar(run), idleBar(run, idle, loadEnd?.atMs ?? 0)];
}

function errorsBar(run: SoakRun, decisions: number): Bar {
  const exit = run.exitCode === undefined ? 'died during the run' : `exit code ${run.exitCode} on SIGTERM`;
  return {
    name: 'errors',
    pass: run.errors === 0 && run.errorLines === 0 && run.exitCode === 0,
    detail: `${run.errors} failed calls of ${decisions.toLocaleString('en-US')} decisions; ${run.errorLines} error lines in the service log; ${exit}`,
  };
}

function rssBar(run: SoakRun, settled: readonly Sample[]): Bar {
  if (settled.length < 6) return { name: 'RSS', pass: false, detail: `only ${settled.length} samples after warm-up: run longer` };
  const third = Math.floor(settled.length / 3);
  const first = settled.slice(0, third).map((s) => s.rssBytes);
  const last = settled.slice(-third).map((s) => s.rssBytes);
  const floorGrowth = Math.min(...last) / Math.min(...first) - 1;
  const medianGrowth = median(last) / median(first) - 1;
  const rss = settled.map((s) => s.rssBytes);
  const atRest = `at rest ${mib(run.samples[0]?.rssBytes ?? Number.NaN)} MiB before the load, ${mib(run.samples.at(-1)?.rssBytes ?? Number.NaN)} MiB at the end of idle`;
  return {
    name: 'RSS',
    pass: floorGrowth <= RSS_GROWTH_BAR || medianGrowth <= RSS_GROWTH_BAR,
    detail:
      `after warm-up ${mib(Math.min(...rss))}-${mib(Math.max(...rss))} MiB (median ${mib(median(rss))}); last third against the first: ` +
      `floor ${signedPercent(floorGrowth)}, median ${signedPercent(medianGrowth)} (bar: +${RSS_GROWTH_BAR * 100}% for both); ` +
      `least-squares trend ${signed(slopePerMinute(settled, (s) => s.rssBytes) / MiB)} MiB/min; ${atRest}`,
  };
}

function fdBar(settled: readonly Sample[]): Bar {
  if (settled.length === 0) return { name: 'fds', pass: false, detail: 'no samples after warm-up' };
  const fds = settled.map((s) => s.fds);
  const spread = Math.max(...fds) - Math.min(...fds);
  return {
    name: 'fds',
    pass: spread <= FD_SPREAD_BAR,
    detail: `open after warm-up ${Math.min(...fds)}-${Math.max(...fds)} (bar: a spread of ${FD_SPREAD_BAR})`,
  };
}

function keysBar(run: SoakRun): Bar {
  const loaded = run.samples.filter((s) => s.phase !== 'idle');
  const over = loaded.filter((s) => s.keys > keyBound(run, s));
  const withoutTtl = Math.max(0, ...run.samples.map((s) => s.keysWithoutTtl));
  const most = Math.max(0, ...loaded.map((s) => s.keys));
  const first = over[0];
  return {
    name: 'keys',
    pass: over.length === 0 && withoutTtl === 0,
    detail:
      `at most ${most.toLocaleString('en-US')} under load; ` +
      (first === undefined
        ? 'every sample within its bound'
        : `${over.length} samples over their bound, first at ${(first.atMs / 1_000).toFixed(0)} s: ${first.keys} > ${keyBound(run, first)}`) +
      ` (bound: ${run.fixedKeys.toLocaleString('en-US')} per user and tenant + calls sent in the last ${run.memoWindowMs / 1_000} s, ` +
      `and expired keys awaiting deletion: at least ${run.staleShare * 100}% of all, or what Redis reports, up to ` +
      `${(Math.max(...loaded.map((s) => s.stale)) * 100).toFixed(1)}%); ${withoutTtl} without a TTL`,
  };
}

/**
 * The most keys the TTLs allow at sample `s`: the fixed ones and a remembered
 * decision per call sent in the last memo window are live; Redis may hold
 * expired ones on top, up to its stale share of all.
 */
export function keyBound(run: SoakRun, s: Sample): number {
  const before = run.samples.filter((o) => o.atMs <= s.atMs - run.memoWindowMs).at(-1);
  return Math.ceil((run.fixedKeys + s.sent - (before?.sent ?? 0)) / (1 - Math.max(run.staleShare, s.stale)));
}

function idleBar(run: SoakRun, idle: readonly Sample[], loadEndMs: number): Bar {
  const zero = idle.find((s) => s.keys === 0);
  const allowed = run.longestTtlMs + run.idleGraceMs;
  const ttl = `longest TTL at the end of the load ${(run.longestTtlMs / 1_000).toFixed(1)} s, bar: it + ${run.idleGraceMs / 1_000} s`;
  if (zero === undefined) return { name: 'idle', pass: false, detail: `keys never reached 0 (last ${idle.at(-1)?.keys ?? '?'}; ${ttl})` };
  const after = zero.atMs - loadEndMs;
  return { name: 'idle', pass: after <= allowed, detail: `keys 0 ${(after / 1_000).toFixed(0)} s after the load stopped (${ttl})` };
}

/** Least-squares slope of `value` over time, per minute. */
export function slopePerMinute(samples: readonly Sample[], value: (s: Sample) => number): number {
  const n = samples.length;
  const mx = samples.reduce((a, s) => a + s.atMs, 0) / n;
  const my = samples.reduce((a, s) => a + value(s), 0) / n;
  const sxy = samples.reduce((a, s) => a + (s.atMs - mx) * (value(s) - my), 0);
  const sxx = samples.reduce((a, s) => a + (s.atMs - mx) ** 2, 0);
  return sxx === 0 ? 0 : (sxy / sxx) * 60_000;
}

const mib = (bytes: number) => (bytes / MiB).toFixed(0);
const signed = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)}`;
const signedPercent = (fraction: number) => `${signed(fraction * 100)}%`;
