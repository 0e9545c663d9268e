// The Grafana dashboard shipped with the chart queries only metrics and labels the
// service exports: names and label names are read from the service's own registry
// (src/metrics/metrics.ts), not from a list copied here.
import { describe, expect, it } from 'vitest';
import { QuotaMetrics } from '../../src/metrics/metrics.js';
import { readChartFile } from './chart.js';

interface Exported {
  type: string;
  labels: string[];
}

/** Every quota_* metric of the service with its type and label names. */
function exportedMetrics(): Map<string, Exported> {
  const metrics = new QuotaMetrics();
  metrics.watchStore({ shared: {}, local: () => 0 });
  const exported = new Map<string, Exported>();
  for (const metric of metrics.registry.getMetricsAsArray()) {
    const { name, labelNames, type } = metric as unknown as { name: string; labelNames: string[]; type: string };
    if (name.startsWith('quota_')) exported.set(name, { type: String(type), labels: labelNames });
  }
  return exported;
}

/** Labels Prometheus adds to every scraped series (target labels). */
const TARGET_LABELS = new Set(['namespace', 'pod', 'job', 'instance', 'service', 'container', 'endpoint']);
const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'];

interface Dashboard {
  panels: { type: string; title: string; targets?: { expr: string }[] }[];
  templating: { list: { name: string; query?: string | { query: string } }[] };
}

const dashboardFile = (): Dashboard => JSON.parse(readChartFile('dashboards/quota-service.json')) as Dashboard;

function queries(dashboard: Dashboard): string[] {
  const panelQueries = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr));
  const variableQueries = dashboard.templating.list.flatMap((variable) => (typeof variable.query === 'object' ? [variable.query.query] : []));
  return [...panelQueries, ...variableQueries];
}

/** The problems of one PromQL expression: unknown metrics, and labels none of its metrics has. */
function problems(expr: string, exported: Map<string, Exported>): string[] {
  const code = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const found: string[] = [];
  const metricNames = new Set<string>();
  for (const [name] of code.matchAll(/\bquota_[a-z0-9_]+/g)) {
    const base = exported.has(name)
      ? name
      : HISTOGRAM_SUFFIXES.map((suffix) => (name.endsWith(suffix) ? name.slice(0, -suffix.length) : '')).find(
          (candidate) => exported.get(candidate)?.type === 'histogram',
        );
    if (base) metricNames.add(base);
    else found.push(`unknown metric ${name}`);
  }
  // Every selector must name a known metric (no metrics from elsewhere).
  for (const [, name] of code.matchAll(/([A-Za-z_:][A-Za-z0-9_:]*)\s*\{/g)) if (!name!.startsWith('quota_')) found.push(`selector on ${name}`);
  const labels = new Set<string>();
  for (const [, body] of code.matchAll(/\{([^}]*)\}/g))
    for (const [, label] of body!.matchAll(/([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)/g)) labels.add(label!);
  for (const [, list] of code.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g))
    for (const label of list!
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean))
      labels.add(label);
  const labelValues = /label_values\([^,]*,\s*([A-Za-z_][A-Za-z0-9_]*)\)/.exec(code);
  if (labelValues) labels.add(labelValues[1]!);
  const histogram = [...metricNames].some((name) => exported.get(name)?.type === 'histogram');
  for (const label of labels) {
    if (TARGET_LABELS.has(label) || (label === 'le' && histogram)) continue;
    if (![...metricNames].some((name) => exported.get(name)!.labels.includes(label))) found.push(`label ${label} on none of ${[...metricNames].join(', ')}`);
  }
  if (metricNames.size === 0) found.push('no quota metric');
  return found.map((problem) => `${problem} in: ${expr}`);
}

describe('Grafana dashboard', () => {
  const exported = exportedMetrics();
  const dashboard = dashboardFile();

  it('the service exports the metrics the docs list (the registry read works)', () => {
    expect([...exported.keys()]).toEqual(expect.arrayContaining(['quota_decisions_total', 'quota_check_duration_seconds', 'quota_store_failures_total']));
    expect(exported.get('quota_decisions_total')!.labels).toEqual(['policy', 'limit', 'result', 'source']);
  });

  it('queries only metrics and labels the service exports', () => {
    expect(queries(dashboard).flatMap((expr) => problems(expr, exported))).toEqual([]);
  });

  it.each([
    ['a metric the service does not export', 'sum(rate(quota_decision_total[5m]))', /unknown metric quota_decision_total/],
    [
      'a label the metric does not have',
      'sum by (policy) (rate(quota_check_duration_seconds_bucket[5m]))',
      /label policy on none of quota_check_duration_seconds/,
    ],
    ['a selector label the metric does not have', 'quota_store_failures_total{reason="x"}', /label reason/],
    ['a metric of some other exporter', 'up{job="x"} * on() quota_state_keys', /selector on up/],
  ])('the check catches %s', (_what, expr, message) => {
    expect(problems(expr, exported).join('\n')).toMatch(message);
  });

  it('shows decisions per policy, the rejection ratio, check latency percentiles, store errors and the decision source', () => {
    const exprs = queries(dashboard).map((expr) => expr.replace(/\s+/g, ' '));
    const has = (pattern: RegExp) => exprs.some((expr) => pattern.test(expr));
    expect(has(/sum by \(policy, result\) \(rate\(quota_decisions_total\{/)).toBe(true);
    expect(has(/sum by \(policy\) \(rate\(quota_decisions_total\{[^}]*result="rejected"[^}]*\}.*\) \/ sum by \(policy\) \(rate\(quota_decisions_total\{/)).toBe(
      true,
    );
    for (const q of ['0.5', '0.95', '0.99'])
      expect(has(new RegExp(`histogram_quantile\\(${q.replace('.', '\\.')}, sum by \\(le\\) \\(rate\\(quota_check_duration_seconds_bucket\\{`)), q).toBe(true);
    expect(has(/sum by \(kind\) \(rate\(quota_store_failures_total\{/)).toBe(true);
    expect(has(/sum by \(source\) \(rate\(quota_decisions_total\{/)).toBe(true);
  });

  it('has unique panel ids and a Prometheus data source variable used by every query', () => {
    const raw = JSON.parse(readChartFile('dashboards/quota-service.json')) as {
      panels: { id: number; datasource?: { uid: string }; targets?: { datasource: { uid: string } }[] }[];
    };
    const ids = raw.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, meant literally
    for (const panel of raw.panels) for (const target of panel.targets ?? []) expect(target.datasource.uid).toBe('${datasource}');
    expect(dashboard.templating.list.find((variable) => variable.name === 'datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
  });
});
