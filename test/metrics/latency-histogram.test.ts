// quota_check_duration_seconds is exported by our own LatencyHistogram (cheaper per
// observation); scrapers and dashboards must see exactly what prom-client's Histogram
// gave. Both are fed the same observations and their registries' output compared.
import fc from 'fast-check';
import { Histogram, Registry, type RegistryContentType } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LatencyHistogram } from '../../src/metrics/latency-histogram.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
const SOURCES = ['store', 'fail_open', 'fail_closed', 'local'] as const;
const NAME = 'quota_check_duration_seconds';
const HELP = 'Time to decide one Allow call inside the service (store call or failure mode included), by source.';

/** The same histogram twice: prom-client's and ours, each on its own registry. */
function pair(openMetrics = false) {
  const registry = () => {
    const made = new Registry<RegistryContentType>();
    if (openMetrics) made.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    return made;
  };
  const theirRegistry = registry();
  const ourRegistry = registry();
  const theirs = new Histogram({ name: NAME, help: HELP, labelNames: ['source'], buckets: BUCKETS, registers: [theirRegistry as Registry] });
  const ours = new LatencyHistogram({ name: NAME, help: HELP, labelName: 'source', buckets: BUCKETS, registers: [ourRegistry] });
  return {
    observe(source: string, value: number) {
      theirs.observe({ source }, value);
      ours.observe(source, value);
    },
    theirRegistry,
    ourRegistry,
  };
}

/** Durations around every bucket bound (below, on, just above), past the last one, and 0. */
const duration = fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), fc.constantFrom(0, ...BUCKETS, ...BUCKETS.map((b) => b + Number.EPSILON), 1.5, 60));
const observations = fc.array(fc.tuple(fc.constantFrom(...SOURCES), duration), { maxLength: 200 });

describe('LatencyHistogram (src/metrics/latency-histogram.ts) exports what prom-client Histogram does', () => {
  it('the same text (Prometheus and OpenMetrics) and JSON for any observations, in any order of sources', async () => {
    await fc.assert(
      fc.asyncProperty(observations, fc.boolean(), async (seen, openMetrics) => {
        const { observe, theirRegistry, ourRegistry } = pair(openMetrics);
        for (const [source, value] of seen) observe(source, value);
        expect(await ourRegistry.metrics()).toBe(await theirRegistry.metrics());
        expect(await ourRegistry.getMetricsAsJSON()).toStrictEqual(await theirRegistry.getMetricsAsJSON());
      }),
      { numRuns: 200 },
    );
  });

  it('a value on a bucket bound counts in that bucket; one past the last bound only in +Inf, _sum and _count', async () => {
    const { observe, ourRegistry } = pair();
    observe('store', 0.001);
    observe('store', 5);
    const text = await ourRegistry.metrics();
    expect(text).toContain(`${NAME}_bucket{le="0.0005",source="store"} 0\n`);
    expect(text).toContain(`${NAME}_bucket{le="0.001",source="store"} 1\n`);
    expect(text).toContain(`${NAME}_bucket{le="1",source="store"} 1\n`);
    expect(text).toContain(`${NAME}_bucket{le="+Inf",source="store"} 2\n`);
    expect(text).toContain(`${NAME}_sum{source="store"} 5.001\n`);
    expect(text).toContain(`${NAME}_count{source="store"} 2\n`);
  });

  it('resetMetrics empties it as it does prom-client metrics', async () => {
    const { observe, theirRegistry, ourRegistry } = pair();
    observe('local', 0.2);
    theirRegistry.resetMetrics();
    ourRegistry.resetMetrics();
    expect(await ourRegistry.metrics()).toBe(await theirRegistry.metrics());
    expect(await ourRegistry.metrics()).not.toContain('source="local"');
  });

  it('a duration that is not a finite number is refused as prom-client refuses it, and nothing is counted', async () => {
    const { theirRegistry, ourRegistry } = pair();
    const ours = ourRegistry.getSingleMetric(NAME) as unknown as LatencyHistogram;
    const theirs = theirRegistry.getSingleMetric(NAME) as Histogram;
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => theirs.observe({ source: 'store' }, bad)).toThrow(TypeError);
      expect(() => ours.observe('store', bad)).toThrow(`Value is not a valid number: ${String(bad)}`);
    }
    expect(await ourRegistry.metrics()).toBe(await theirRegistry.metrics());
  });

  it('is listed with the name, type and label names the dashboard test reads', () => {
    const { ourRegistry } = pair();
    const [metric] = ourRegistry.getMetricsAsArray() as unknown as { name: string; type: string; labelNames: string[] }[];
    expect(metric).toMatchObject({ name: NAME, type: 'histogram', labelNames: ['source'] });
  });
});
