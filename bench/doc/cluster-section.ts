// Redis Cluster against one node (bench/cluster.ts): a bar per store and
// policy, whatever stores and policies the bench reports, each store's ratio to
// the first (one node), and the lines the bench prints around its table.
import { median } from '../stats.js';
import { type Chart, clusterChart, clusterRatios, STORE_NAMES } from './charts.js';
import type { Section } from './comparison-sections.js';
import { measuredLine, missingOrFailed, whole } from './measured.js';
import { clusterFiguresSchema, type Results } from './results.js';

export function clusterSection(results: Results): Section {
  const intro = [
    '## Redis Cluster (3 masters) against one node',
    'The quota service on one Redis node and on a 3-master cluster, the same load, rounds alternating. The cluster has no replicas, ' +
      "as the one node has none: on a small machine a replica's CPU is taken from everything else. The same cluster with a replica per " +
      'master is measured beside them for reference. **one limit** = a token ' +
      'bucket per user; **user + tenant** = the `orders.create` shape: a bucket and a per-minute window per user, a per-minute window per ' +
      "tenant, so on a cluster the user's keys and the tenant's sit in two slots. On one machine three masters cannot add capacity: the " +
      'ratio shows what the cluster path itself costs a service instance. The bench describes its load in its first lines, quoted below.',
  ].join('\n\n');
  const step = results.steps['cluster'];
  const trouble = missingOrFailed(step, 'make bench-quick');
  const parsed = clusterFiguresSchema.safeParse(step?.figures);
  if (step === undefined || !parsed.success) {
    const why = step !== undefined && !parsed.success ? `\n\nIts figures file could not be read: ${parsed.error.issues[0]?.message ?? 'invalid'}.` : '';
    return { markdown: `${intro}\n\n${trouble ?? measuredLine(step as NonNullable<typeof step>)}${why}`, charts: [] };
  }
  const figures = parsed.data;
  const chart: Chart = clusterChart(figures, 'bench-cluster.svg');
  const ratios = clusterRatios(figures);
  const name = (store: string) => STORE_NAMES[store] ?? store;
  const rows: string[] = [];
  for (const policy of [...new Set(figures.rows.map((r) => r.policy))]) {
    for (const store of [...new Set(figures.rows.map((r) => r.store))]) {
      const mine = figures.rows.filter((r) => r.policy === policy && r.store === store);
      const m = (pick: (r: (typeof mine)[number]) => number) => median(mine.map(pick));
      const ratio = ratios.find((r) => r.policy === policy && r.store === store);
      const ratioCell =
        ratio === undefined ? '1 (baseline)' : `**${ratio.ratio.toFixed(2)}** (rounds ${ratio.roundRatios.map((x) => x.toFixed(2)).join(', ')})`;
      rows.push(
        `| ${policy} | ${name(store)} | ${whole(m((r) => r.decisionsPerSecond))} | ${m((r) => r.p50Ms).toFixed(2)} | ${m((r) => r.p99Ms).toFixed(2)} | ` +
          `${ratioCell} | ${mine.reduce((sum, r) => sum + r.errors, 0)} |`,
      );
    }
  }
  const table = `| policy | store | decisions/s | p50 (ms) | p99 (ms) | ratio to one node | errors |\n|---|---|---:|---:|---:|---|---:|\n${rows.join('\n')}`;
  // The bench's own description of its load (its first lines) and what it reports after its table (key spread).
  const lines = step.output.split('\n');
  const setup = lines.slice(0, Math.max(0, lines.indexOf(''))).join('\n');
  const after = lines.filter((l) => /^keys:/.test(l)).join('\n');
  const markdown = [
    intro,
    trouble ?? measuredLine(step),
    setup === '' ? '' : `\`\`\`text\n${setup}\n\`\`\``,
    `![${chart.alt}](img/${chart.file})`,
    `Medians over the rounds; the ratio is the median of the per-round ratios (each cluster round against the one-node round beside it):\n\n${table}`,
    after === '' ? '' : `\`\`\`text\n${after}\n\`\`\``,
  ];
  return { markdown: markdown.filter((p) => p !== '').join('\n\n'), charts: [chart] };
}
