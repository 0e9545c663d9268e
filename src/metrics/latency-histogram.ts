import { format } from 'node:util';
import type { Registry, RegistryContentType } from 'prom-client';

export interface LatencyHistogramConfig {
  name: string;
  help: string;
  /** The one label the series are split by. */
  labelName: string;
  /** Upper bounds, ascending. */
  buckets: readonly number[];
  registers: readonly Registry<RegistryContentType>[];
}

/** One label value's series: bucket counts (each bucket's own, not cumulative), sum and count. */
interface Series {
  /** The label object the registry prints on every line of the series. */
  readonly labels: Record<string, string>;
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** A line of the histogram as the registry formats it (prom-client's own shape). */
interface Sample {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

/**
 * A histogram with one label, observed once per decision, exported exactly as
 * prom-client's Histogram would be (same lines, labels, order and values; test/
 * metrics/latency-histogram.test.ts compares the two). prom-client's observe
 * builds a closure, a label-value pair and a hash string and validates the
 * labels on every call, too much to pay per decision. Here an observation is
 * a map lookup and three additions. The
 * registry reads it through the same interface as its own metrics
 * (getForPromString for the text format, get for JSON).
 */
export class LatencyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  private readonly labelName: string;
  private readonly bounds: readonly number[];
  /** By label value, in the order first observed (prom-client's order too). */
  private series = new Map<string, Series>();

  constructor(config: LatencyHistogramConfig) {
    this.name = config.name;
    this.help = config.help;
    this.labelName = config.labelName;
    this.labelNames = [config.labelName];
    this.bounds = [...config.buckets];
    for (const registry of config.registers) registry.registerMetric(this as never);
  }

  observe(labelValue: string, value: number): void {
    // As prom-client: a value that is not a finite number is a bug in the caller.
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${format(value)}`);
    let series = this.series.get(labelValue);
    if (series === undefined) {
      series = { labels: { [this.labelName]: labelValue }, counts: new Float64Array(this.bounds.length), sum: 0, count: 0 };
      this.series.set(labelValue, series);
    }
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        series.counts[i]!++;
        break;
      }
    }
    series.sum += value;
    series.count++;
  }

  /** For Registry.resetMetrics, as prom-client's metrics have. */
  reset(): void {
    this.series = new Map();
  }

  /** What the registry formats as text: buckets labelled by `le`, the series label shared. */
  async getForPromString() {
    const bucketName = `${this.name}_bucket`;
    const values: Sample[] = [];
    for (const series of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += series.counts[i]!;
        values.push({ labels: { le: this.bounds[i]! }, sharedLabels: series.labels, value: cumulative, metricName: bucketName, exemplar: null });
      }
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: series.labels, value: series.count, metricName: bucketName, exemplar: null },
        { labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count`, exemplar: undefined },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The JSON form (Registry.getMetricsAsJSON): each line's labels with the shared one merged in. */
  async get() {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ labels, sharedLabels, value, metricName, exemplar }) => ({
        value,
        metricName,
        exemplar,
        labels: { ...labels, ...sharedLabels },
      })),
    };
  }
}
