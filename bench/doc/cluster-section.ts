// Redis Cluster against one node (bench/cluster.ts): a bar per store and
// policy, whatever stores and policies the bench reports, each store's ratio to
// the first (one node), and the lines the bench prints around its table.
import { CLUSTER_TARGETS, JUDGED_STORE } from '../cluster-targets.js';
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
  const stores = [...new Set(figures.rows.map((r) => r.store))];
  const policies = [...new Set(figures.rows.map((r) => r.policy))];
  // CPU per decision and script calls, when the bench wrote them.
  const withCpu = figures.rows.some((r) => r.serviceUs !== undefined);
  const optional = (values: (number | undefined)[]) => {
    const known = values.filter((v): v is number => v !== undefined);
    return known.length === 0 ? 'n/a' : median(known).toFixed(1);
  };
  const rows: string[] = [];
  const ratioRows: string[] = [];
  for (const policy of policies) {
    for (const store of stores) {
      const mine = figures.rows.filter((r) => r.policy === policy && r.store === store);
      const m = (pick: (r: (typeof mine)[number]) => number) => median(mine.map(pick));
      const cpu = withCpu
        ? ` ${optional(mine.map((r) => r.serviceUs))} | ${optional(mine.map((r) => r.redisUs))} | ${optional(mine.map((r) => r.callsPer100))} |`
        : '';
      rows.push(
        `| ${policy} | ${name(store)} | ${whole(m((r) => r.decisionsPerSecond))} | ${m((r) => r.p50Ms).toFixed(2)} | ${m((r) => r.p99Ms).toFixed(2)} |${cpu} ` +
          `${mine.reduce((sum, r) => sum + r.errors, 0)} |`,
      );
      const ratio = ratios.find((r) => r.policy === policy && r.store === store);
      if (ratio === undefined) continue;
      const target = store === JUDGED_STORE ? CLUSTER_TARGETS[policy] : undefined;
      const judged = target === undefined ? 'for reference' : `≥ ${target.toFixed(1)}×: ${ratio.ratio >= target ? '**met**' : '**not met**'}`;
      ratioRows.push(`| ${policy} | ${name(store)} | ${ratio.roundRatios.map((x) => x.toFixed(2)).join(', ')} | **${ratio.ratio.toFixed(2)}** | ${judged} |`);
    }
  }
  const cpuHeader = withCpu ? ' service CPU µs/decision | Redis CPU µs/decision | script calls / 100 decisions |' : '';
  const cpuRule = withCpu ? '---:|---:|---:|' : '';
  const table = `| policy | store | decisions/s | p50 (ms) | p99 (ms) |${cpuHeader} errors |\n|---|---|---:|---:|---:|${cpuRule}---:|\n${rows.join('\n')}`;
  const ratioTable = `| policy | store | per round (store / one node) | median | target |\n|---|---|---|---:|---|\n${ratioRows.join('\n')}`;
  // The bench's own description of its load (its first lines) and what it reports after its table (key spread).
  const lines = step.output.split('\n');
  const setup = lines.slice(0, Math.max(0, lines.indexOf(''))).join('\n');
  const after = lines.filter((l) => /^keys:/.test(l)).join('\n');
  const markdown = [
    intro,
    trouble ?? measuredLine(step),
    setup === '' ? '' : `\`\`\`text\n${setup}\n\`\`\``,
    `![${chart.alt}](img/${chart.file})`,
    `Medians over the rounds${withCpu ? ' (CPU per decision: the service process, and Redis: every master on a cluster)' : ''}:\n\n${table}`,
    `Against one node: each round's ratio (a store against one node in the same round), and their median, ` +
      `judged against the target for the cluster without replicas:\n\n${ratioTable}`,
    after === '' ? '' : `\`\`\`text\n${after}\n\`\`\``,
  ];
  return { markdown: markdown.filter((p) => p !== '').join('\n\n'), charts: [chart] };
}
