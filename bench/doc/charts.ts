// The report's plots as Vega-Lite specs, built from the results alone (no I/O):
// bench/doc/render-svg.ts turns each into an SVG. Lines are the medians over the
// rounds; the faint dots around them are the rounds themselves, so a reader sees
// how much the shared machine moved the figures.
import type { TopLevelSpec } from 'vega-lite';
import { median } from '../stats.js';
import { sweepMedians } from '../sweep-table.js';
import type { ClusterFigures, SweepFigures } from './results.js';

/** Ours in blue, the libraries people pick instead in warm colours, no limiter and the bare relay in grey: the same in every plot. */
const SERIES_COLOURS: Record<string, string> = {
  'quota client (batched)': '#1f6fb4',
  'quota client, slices': '#1f6fb4',
  'quota client, slices: false': '#7fb2de',
  'quota service': '#1f6fb4',
  'rate-limiter-flexible': '#e8743b',
  'express-rate-limit': '#e8743b',
  '@fastify/rate-limit': '#c23b22',
  'no limiter': '#8c8c8c',
  'two-hop relay (floor)': '#8c8c8c',
};
const OTHER_COLOURS = ['#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#bcbd22', '#17becf'];

const CONFIG = {
  background: 'white',
  font: 'DejaVu Sans, Verdana, sans-serif',
  padding: 12,
  // Vega measures text by an estimate when rendering headless; no label limits, so nothing is cut short.
  axis: { labelFontSize: 12, titleFontSize: 13, gridColor: '#e4e4e4', labelLimit: 0 },
  legend: { labelFontSize: 12, titleFontSize: 12, orient: 'bottom', direction: 'horizontal', columns: 4, labelLimit: 0 },
  header: { labelFontSize: 13, titleFontSize: 13 },
  title: { fontSize: 15, subtitleFontSize: 12, subtitleColor: '#555', anchor: 'start' },
  view: { stroke: '#cfcfcf' },
} as const;

export interface Chart {
  /** File name under docs/img/. */
  file: string;
  /** What the markdown's image text says (alt text). */
  alt: string;
  spec: TopLevelSpec;
}

interface SeriesRow {
  series: string;
  group: string;
  concurrency: number;
  decisionsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** Per kind and concurrency: the median row, and the rounds' rows. */
function sweepRows(figures: SweepFigures): { medians: SeriesRow[]; rounds: SeriesRow[] } {
  const kinds = new Map(figures.kinds.map((k) => [k.id, { series: k.series ?? k.label, group: k.group ?? '' }]));
  const named = (kind: string) => kinds.get(kind) ?? { series: kind, group: '' };
  const medians = sweepMedians(figures.points, [...kinds.keys()]).map((m) => ({ ...named(m.kind), ...pickFigures(m) }));
  const rounds = figures.points.filter((p) => kinds.has(p.kind)).map((p) => ({ ...named(p.kind), ...pickFigures(p) }));
  return { medians, rounds };
}

function pickFigures(m: { concurrency: number; decisionsPerSecond: number; p50Ms: number; p99Ms: number }) {
  return { concurrency: m.concurrency, decisionsPerSecond: m.decisionsPerSecond, p50Ms: m.p50Ms, p99Ms: m.p99Ms };
}

/** The colour scale: the fixed colours for the names above, others in order. */
function colourScale(series: readonly string[]): { domain: string[]; range: string[] } {
  const domain = [...new Set(series)];
  let other = 0;
  const range = domain.map((name) => SERIES_COLOURS[name] ?? (OTHER_COLOURS[other++ % OTHER_COLOURS.length] as string));
  return { domain, range };
}

/** Decisions/s against calls in flight: a line per limiter, x on a log scale (the concurrencies grow by factors). */
export function throughputChart(
  figures: SweepFigures,
  text: { file: string; title: string; xTitle: string; yTitle: string; alt: string; logY?: boolean },
): Chart {
  const { medians, rounds } = sweepRows(figures);
  const colour = { field: 'series', type: 'nominal' as const, title: null, scale: colourScale(medians.map((m) => m.series)) };
  const concurrencies = [...new Set(medians.map((m) => m.concurrency))].sort((a, b) => a - b);
  // A tick at each concurrency measured, and no others.
  const x = {
    field: 'concurrency',
    type: 'quantitative' as const,
    title: text.xTitle,
    scale: { type: 'log' as const, base: 2 },
    axis: { values: concurrencies },
  };
  // A log scale when the kinds lie orders of magnitude apart (decisions taken locally against decisions with a hop).
  const ticks = logTicks(rounds.map((r) => r.decisionsPerSecond));
  const y = text.logY
    ? {
        field: 'decisionsPerSecond',
        type: 'quantitative' as const,
        title: text.yTitle,
        scale: { type: 'log' as const, domain: [ticks[0] as number, ticks.at(-1) as number], nice: false },
        axis: { values: ticks, format: '~s' },
      }
    : { field: 'decisionsPerSecond', type: 'quantitative' as const, title: text.yTitle, axis: { format: ',d' } };
  const spec = layered({ text: text.title, subtitle: 'lines: medians over the rounds; faint dots: the rounds' }, [
    // Lines first: the legend takes its symbols from the first layer, and the round dots are faint.
    { rows: medians, mark: { type: 'line', point: true, strokeWidth: 2.5 }, encoding: { x, y, color: colour } },
    { rows: rounds, mark: { type: 'point', filled: true, size: 28, opacity: 0.35 }, encoding: { x, y, color: colour } },
  ]);
  return { file: text.file, alt: text.alt, spec };
}

/**
 * p50 and p99 against the load each concurrency produced (median decisions/s),
 * a line per limiter and percentile, y on a log scale; the numbers beside the
 * p99 points are the calls in flight.
 */
export function latencyChart(figures: SweepFigures, text: { file: string; title: string; xTitle: string; alt: string }): Chart {
  const { medians } = sweepRows(figures);
  const long = medians.flatMap((m) => [
    { ...m, percentile: 'p50', ms: m.p50Ms },
    { ...m, percentile: 'p99', ms: m.p99Ms },
  ]);
  const colour = { field: 'series', type: 'nominal' as const, title: null, scale: colourScale(medians.map((m) => m.series)) };
  const x = { field: 'decisionsPerSecond', type: 'quantitative' as const, title: text.xTitle, axis: { format: ',d' } };
  const ticks = logTicks(long.map((r) => r.ms));
  const y = {
    field: 'ms',
    type: 'quantitative' as const,
    title: 'latency (ms)',
    scale: { type: 'log' as const, domain: [ticks[0] as number, ticks.at(-1) as number], nice: false },
    axis: { values: ticks, format: '~g' },
  };
  const dash = {
    field: 'percentile',
    type: 'nominal' as const,
    title: null,
    scale: {
      domain: ['p50', 'p99'],
      range: [
        [1, 0],
        [5, 3],
      ],
    },
  };
  const shape = { field: 'percentile', type: 'nominal' as const, title: null, scale: { domain: ['p50', 'p99'], range: ['circle', 'triangle-up'] } };
  const spec = layered(text.title, [
    {
      rows: long,
      mark: { type: 'line', point: true, strokeWidth: 2 },
      // Joined in the order of the calls in flight: the line is the path the limiter takes as the load grows.
      encoding: { x, y, color: colour, strokeDash: dash, shape, detail: { field: 'percentile' }, order: { field: 'concurrency', type: 'quantitative' } },
    },
    {
      rows: long.filter((r) => r.percentile === 'p99'),
      mark: { type: 'text', dy: -9, fontSize: 10, color: '#555' },
      encoding: { x, y, text: { field: 'concurrency', type: 'quantitative' } },
    },
  ]);
  return { file: text.file, alt: text.alt, spec };
}

/** Ticks 1, 2, 5 per decade covering `values` (ms), so a log axis reads without a grid line per unit. */
export function logTicks(values: readonly number[]): number[] {
  const positive = values.filter((v) => Number.isFinite(v) && v > 0);
  if (positive.length === 0) return [0.1, 1];
  const lo = Math.min(...positive);
  const hi = Math.max(...positive);
  const ticks: number[] = [];
  for (let decade = Math.floor(Math.log10(lo)); decade <= Math.ceil(Math.log10(hi)); decade++) {
    for (const step of [1, 2, 5]) ticks.push(Number((step * 10 ** decade).toPrecision(1)));
  }
  const first = ticks.findLastIndex((t) => t <= lo);
  const last = ticks.findIndex((t) => t >= hi);
  return ticks.slice(Math.max(0, first), last === -1 ? undefined : last + 1);
}

/** One layer of a layered Vega-Lite chart (a mark and its encoding), as vega-lite types it. */
type UnitLayer = Extract<Extract<TopLevelSpec, { layer: unknown }>['layer'][number], { mark: unknown }>;

interface Layer {
  rows: readonly SeriesRow[];
  mark: UnitLayer['mark'];
  encoding: UnitLayer['encoding'];
}

/**
 * Layers over one data set (each layer's rows tagged, and filtered back per
 * layer), so the chart can be faceted: Vega-Lite facets the top-level data
 * only. A panel per group when the rows have groups (the HTTP bench's
 * frameworks), else one plot.
 */
function layered(title: string | { text: string; subtitle: string }, layers: readonly Layer[]): TopLevelSpec {
  const values = layers.flatMap((l, i) => l.rows.map((row) => ({ ...row, layer: i })));
  const layer = layers.map((l, i) => ({ transform: [{ filter: `datum.layer === ${i}` }], mark: l.mark, encoding: l.encoding }));
  const groups = [...new Set(values.map((r) => r.group))];
  if (groups.length === 1 && groups[0] === '') {
    return { title, data: { values }, width: 520, height: 300, layer, config: CONFIG };
  }
  return {
    title,
    data: { values },
    facet: { column: { field: 'group', type: 'nominal', title: null, sort: groups } },
    spec: { width: 300, height: 280, layer },
    // Each panel on its own scales: the frameworks differ several times over, and each limiter is read against its own route.
    resolve: { scale: { x: 'independent', y: 'independent' } },
    config: CONFIG,
  };
}

export interface ClusterRatio {
  policy: string;
  store: string;
  /** Median decisions/s of this store over the baseline store's, per policy; and the median of the per-round ratios. */
  ratio: number;
  roundRatios: number[];
}

/** Each store against the first one bench/cluster.ts reports (one node), per policy, round by round. */
export function clusterRatios(figures: ClusterFigures): ClusterRatio[] {
  const stores = [...new Set(figures.rows.map((r) => r.store))];
  const policies = [...new Set(figures.rows.map((r) => r.policy))];
  const baseline = stores[0];
  const out: ClusterRatio[] = [];
  for (const policy of policies) {
    const base = figures.rows.filter((r) => r.store === baseline && r.policy === policy);
    for (const store of stores.slice(1)) {
      const mine = figures.rows.filter((r) => r.store === store && r.policy === policy);
      const roundRatios = mine.flatMap((r) => {
        const b = base.find((x) => x.round === r.round);
        return b === undefined || b.decisionsPerSecond === 0 ? [] : [r.decisionsPerSecond / b.decisionsPerSecond];
      });
      out.push({ policy, store, ratio: median(roundRatios), roundRatios });
    }
  }
  return out;
}

/** How the report names bench/cluster.ts's stores; other names are shown as they are. */
export const STORE_NAMES: Record<string, string> = {
  single: 'one Redis node',
  cluster: '3-master cluster',
  'cluster-replicated': '3 masters + 3 replicas',
};

/** Decisions/s per policy, a bar per store, rounds as dots, and each store's ratio to the first above its bar. */
export function clusterChart(figures: ClusterFigures, file: string): Chart {
  const name = (store: string) => STORE_NAMES[store] ?? store;
  const stores = [...new Set(figures.rows.map((r) => name(r.store)))];
  const policies = [...new Set(figures.rows.map((r) => r.policy))];
  const ratios = clusterRatios(figures);
  const bars = policies.flatMap((policy) =>
    [...new Set(figures.rows.map((r) => r.store))].map((store) => {
      const mine = figures.rows.filter((r) => r.store === store && r.policy === policy);
      const ratio = ratios.find((r) => r.policy === policy && r.store === store);
      return {
        policy,
        store: name(store),
        decisionsPerSecond: median(mine.map((r) => r.decisionsPerSecond)),
        label: ratio === undefined ? '' : `${ratio.ratio.toFixed(2)}×`,
      };
    }),
  );
  const rounds = figures.rows.map((r) => ({ policy: r.policy, store: name(r.store), decisionsPerSecond: r.decisionsPerSecond }));
  const colour = { field: 'store', type: 'nominal' as const, title: null, scale: { domain: stores, range: ['#8c8c8c', '#1f6fb4', ...OTHER_COLOURS] } };
  const x = { field: 'policy', type: 'nominal' as const, title: null, sort: policies, axis: { labelAngle: 0 } };
  const xOffset = { field: 'store', type: 'nominal' as const, sort: stores };
  const y = { field: 'decisionsPerSecond', type: 'quantitative' as const, title: 'decisions/s', axis: { format: ',d' } };
  const spec: TopLevelSpec = {
    title: {
      text: 'Redis Cluster against one node, same run',
      subtitle: 'bars: medians over the rounds; dots: the rounds; above a bar: the median of its per-round ratios to one node',
    },
    width: 520,
    height: 300,
    layer: [
      { data: { values: bars }, mark: { type: 'bar' }, encoding: { x, xOffset, y, color: colour } },
      {
        data: { values: rounds },
        mark: { type: 'point', filled: true, color: '#222', size: 22, opacity: 0.6 },
        encoding: { x, xOffset, y },
      },
      {
        data: { values: bars },
        mark: { type: 'text', dy: -8, fontSize: 12, fontWeight: 'bold' },
        encoding: { x, xOffset, y, text: { field: 'label' } },
      },
    ],
    config: CONFIG,
  };
  return { file, alt: 'Bar chart: decisions/s of the service on one Redis node and on a 3-master cluster, per policy', spec };
}
