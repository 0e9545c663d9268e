// The benchmark report writer (bench/doc/): results in, markdown and plot specs
// out. No measuring here: the figures are made up, so every expected number is
// known.
import { describe, expect, it } from 'vitest';
import { buildReport } from '../../bench/doc/build-report.js';
import { clusterRatios, logTicks } from '../../bench/doc/charts.js';
import { printedOutput } from '../../bench/doc/printed-sections.js';
import { renderSvg } from '../../bench/doc/render-svg.js';
import { parseResults, type Results, type Step } from '../../bench/doc/results.js';

const MACHINE = {
  cpuModel: 'Test CPU',
  cpus: 2,
  memoryGiB: 8,
  os: 'Linux 6.1',
  node: 'v20.20.2',
  redis: '7.0.15',
  loadAverage: [1.5, 1, 0.5] as [number, number, number],
  note: 'nothing else running',
};

function step(id: string, figures: unknown, output = '', exitCode = 0): Step {
  return {
    id,
    command: `npx tsx bench/${id}.ts --rounds 3`,
    target: 'make bench',
    startedAt: '2026-11-24T10:20:30.000Z',
    seconds: 42,
    exitCode,
    machine: MACHINE,
    figures,
    output,
    ...(exitCode === 0 ? {} : { errorOutput: 'bench: some calls failed' }),
  };
}

/** Three rounds per kind and concurrency: decisions/s base, base*2, base*3 (median base*2), p99 = concurrency ms. */
function sweepPoints(kinds: Record<string, number>, concurrencies: number[]) {
  return Object.entries(kinds).flatMap(([kind, base]) =>
    concurrencies.flatMap((concurrency) =>
      [1, 2, 3].map((round) => ({
        kind,
        concurrency,
        round,
        decisionsPerSecond: base * concurrency * round,
        p50Ms: concurrency / 2,
        p95Ms: concurrency,
        p99Ms: concurrency,
        calls: 1000,
        errors: 0,
      })),
    ),
  );
}

function fullResults(): Results {
  return {
    version: 1,
    steps: {
      limiters: step('limiters', {
        kinds: [
          { id: 'quota', label: 'quota client (batched)' },
          { id: 'flexible', label: 'rate-limiter-flexible' },
        ],
        versions: { 'rate-limiter-flexible': '11.4.0' },
        points: sweepPoints({ quota: 300, flexible: 200 }, [1, 16]),
      }),
      'http-limiters': step('http-limiters', {
        kinds: [
          { id: 'express-none', label: 'Express, no limiter', group: 'Express', series: 'no limiter' },
          { id: 'express-native', label: 'Express, express-rate-limit', group: 'Express', series: 'express-rate-limit' },
          { id: 'fastify-none', label: 'Fastify, no limiter', group: 'Fastify', series: 'no limiter' },
          { id: 'fastify-quota', label: 'Fastify, quota service', group: 'Fastify', series: 'quota service' },
        ],
        points: sweepPoints({ 'express-none': 100, 'express-native': 50, 'fastify-none': 400, 'fastify-quota': 100 }, [1, 8]),
      }),
      cluster: step(
        'cluster',
        {
          rows: [
            { store: 'single', policy: 'one limit (user)', round: 1, decisionsPerSecond: 1000, p50Ms: 1, p95Ms: 2, p99Ms: 3, errors: 0 },
            { store: 'cluster', policy: 'one limit (user)', round: 1, decisionsPerSecond: 900, p50Ms: 1, p95Ms: 2, p99Ms: 3, errors: 0 },
            { store: 'single', policy: 'one limit (user)', round: 2, decisionsPerSecond: 2000, p50Ms: 1, p95Ms: 2, p99Ms: 3, errors: 0 },
            { store: 'cluster', policy: 'one limit (user)', round: 2, decisionsPerSecond: 1000, p50Ms: 1, p95Ms: 2, p99Ms: 3, errors: 0 },
            { store: 'single', policy: 'one limit (user)', round: 3, decisionsPerSecond: 1000, p50Ms: 1, p95Ms: 2, p99Ms: 3, errors: 0 },
            { store: 'cluster', policy: 'one limit (user)', round: 3, decisionsPerSecond: 700, p50Ms: 1, p95Ms: 2, p99Ms: 3, errors: 0 },
          ],
        },
        'Cluster bench header: concurrency 48\n\nround 1 single bench 1000\n| store |\n|---|\n\nkeys: single node 10; cluster masters 3 / 3 / 4\n',
      ),
      unary: step(
        'unary',
        undefined,
        'Unary Allow header\n\nround 1 noop 5000 decisions/s\nround 1 service 4000 decisions/s\n\nmedians:\n| kind | decisions/s |\n|---|---:|\n| noop | 5000 |\n',
      ),
    },
  };
}

describe('the benchmark report', () => {
  it('puts each plotted section under its command, date and machine, with medians over the rounds', () => {
    const { markdown, charts } = buildReport(fullResults());
    expect(markdown).toContain('Measured by `make bench` on 2026-11-24 10:20 UTC (42 s), as `npx tsx bench/limiters.ts --rounds 3`.');
    expect(markdown).toContain('Machine: 2 × Test CPU, 8 GiB, Linux 6.1, Node v20.20.2, Redis 7.0.15; load average 1.50 at the start; nothing else running.');
    // Median of 300, 600, 900 (x concurrency) and of 200, 400, 600: the middle round.
    expect(markdown).toContain('| quota client (batched) | 600 (p99 1.0 ms) | 9,600 (p99 16.0 ms) |');
    expect(markdown).toContain('| rate-limiter-flexible | 400 (p99 1.0 ms) | 6,400 (p99 16.0 ms) |');
    expect(markdown).toContain('| quota client (batched) / rate-limiter-flexible | 1.50× | 1.50× |');
    // Each limiter against the same framework's route without one.
    expect(markdown).toContain('| Express, express-rate-limit | 0.50× | 0.50× |');
    expect(markdown).toContain('| Fastify, quota service | 0.25× | 0.25× |');
    expect(markdown).toContain('Versions: rate-limiter-flexible 11.4.0.');
    expect(charts.map((c) => c.file)).toEqual([
      'bench-limiters-throughput.svg',
      'bench-limiters-latency.svg',
      'bench-http-throughput.svg',
      'bench-http-latency.svg',
      'bench-cluster.svg',
    ]);
    for (const chart of charts) expect(markdown).toContain(`](img/${chart.file})`);
  });

  it("sets the quota client's p50 at 1 in flight against its two hops' floor when the limiters bench measured it", () => {
    expect(buildReport(fullResults()).markdown).not.toContain('The floor of its two hops');
    const results = fullResults();
    const limiters = results.steps['limiters'] as { figures: Record<string, unknown> };
    limiters.figures = { ...limiters.figures, floor: { streamHopMs: 0.1, redisRoundTripMs: 0.15 } };
    const { markdown } = buildReport(results);
    // p50 at 1 in flight is 0.5 ms in every round (sweepPoints): 0.5 / (0.1 + 0.15).
    expect(markdown).toContain('At 1 in flight the quota client answers in p50 0.500 ms.');
    expect(markdown).toContain('0.100 ms, plus a Redis round trip (PING), 0.150 ms: 0.250 ms. The client takes 2.00× that floor');
  });

  it('reports the cluster as the median of per-round ratios to one node, with the lines the bench printed around its table', () => {
    const { markdown } = buildReport(fullResults());
    // Rounds: 0.9, 0.5, 0.7 -> median 0.7; the ratio of the medians (900/1000) would be 0.9.
    expect(markdown).toContain('| one limit (user) | 3-master cluster | 900 | 1.00 | 3.00 | 0 |');
    expect(markdown).toContain('| one limit (user) | 3-master cluster | 0.90, 0.50, 0.70 | **0.70** | ≥ 0.8×: **not met** |');
    expect(markdown).toContain('```text\nCluster bench header: concurrency 48\n```');
    expect(markdown).toContain('```text\nkeys: single node 10; cluster masters 3 / 3 / 4\n```');
  });

  it('judges the cluster without replicas against its target, per policy, and shows CPU per decision when the bench wrote it', () => {
    const results = fullResults();
    const row = (store: string, policy: string, round: number, decisionsPerSecond: number, serviceUs: number) => ({
      store,
      policy,
      round,
      decisionsPerSecond,
      p50Ms: 1,
      p95Ms: 2,
      p99Ms: 3,
      errors: 0,
      serviceUs,
      redisUs: serviceUs / 2,
      callsPer100: 1,
    });
    const rows = [1, 2, 3, 4, 5].flatMap((round) => [
      row('single', 'one limit (user)', round, 1000, 10),
      row('cluster', 'one limit (user)', round, 800 + round * 10, 12),
      row('cluster-replicated', 'one limit (user)', round, 500, 14),
      row('single', 'user + tenant (two slots)', round, 1000, 20),
      row('cluster', 'user + tenant (two slots)', round, 590 - round, 30),
    ]);
    results.steps['cluster'] = { ...results.steps['cluster']!, figures: { rows } };
    const { markdown } = buildReport(results);
    expect(markdown).toContain('| one limit (user) | 3-master cluster | 0.81, 0.82, 0.83, 0.84, 0.85 | **0.83** | ≥ 0.8×: **met** |');
    expect(markdown).toContain('| one limit (user) | 3 masters + 3 replicas | 0.50, 0.50, 0.50, 0.50, 0.50 | **0.50** | for reference |');
    expect(markdown).toContain('| user + tenant (two slots) | 3-master cluster | 0.59, 0.59, 0.59, 0.59, 0.58 | **0.59** | ≥ 0.6×: **not met** |');
    expect(markdown).toContain(
      '| policy | store | decisions/s | p50 (ms) | p99 (ms) | service CPU µs/decision | Redis CPU µs/decision | script calls / 100 decisions | errors |',
    );
    expect(markdown).toContain('| user + tenant (two slots) | 3-master cluster | 587 | 1.00 | 3.00 | 30.0 | 15.0 | 1.0 | 0 |');
  });

  it('takes whatever stores and policies bench/cluster.ts reports', () => {
    const rows = ['single', 'cluster', 'cluster-batched'].flatMap((store, i) =>
      ['a', 'b'].map((policy) => ({ store, policy, round: 1, decisionsPerSecond: 100 * (i + 1), p50Ms: 1, p95Ms: 1, p99Ms: 1, errors: 0 })),
    );
    expect(clusterRatios({ rows }).map((r) => [r.policy, r.store, r.ratio])).toEqual([
      ['a', 'cluster', 2],
      ['a', 'cluster-batched', 3],
      ['b', 'cluster', 2],
      ['b', 'cluster-batched', 3],
    ]);
  });

  it('says what is missing or failed instead of showing figures', () => {
    const results = fullResults();
    delete results.steps['http-limiters'];
    results.steps['limiters'] = { ...step('limiters', undefined, '', 1) };
    const { markdown, charts } = buildReport(results);
    expect(markdown).toMatch(/## Behind an HTTP route[^#]*Not measured yet: `make bench-quick` measures it\./);
    expect(markdown).toContain('**The bench failed (exit 1); figures below, if any, are not trustworthy.**');
    expect(markdown).toContain('bench: some calls failed');
    expect(charts.map((c) => c.file)).toEqual(['bench-cluster.svg']);
  });

  it('shows a printed bench as its tables and text, without the per-round lines', () => {
    expect(printedOutput('Header line\n\nround 1 noop 5000\nround 2 noop 5100\n\nmedians:\n| a | b |\n|---|---|\n| 1 | 2 |\nratio 1.2\n')).toBe(
      '```text\nHeader line\n\nmedians:\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```text\nratio 1.2\n```',
    );
    expect(printedOutput('Service on Redis redis://127.0.0.1:36043\n\nratio batched/flexible (median decisions/s): 0.59  target >= 1.0: NOT MET\n')).toBe(
      '```text\nService on Redis redis://127.0.0.1\n\nratio batched/flexible (median decisions/s): 0.59\n```',
    );
    expect(printedOutput('p99 added by the limiter: 0.81 ms (p50 0.27 ms)  target <= 1.5 ms: MET')).toBe(
      '```text\np99 added by the limiter: 0.81 ms (p50 0.27 ms)\n```',
    );
    expect(buildReport(fullResults()).markdown).toContain('### Unary Allow against a no-op gRPC server');
  });

  it('renders every plot to an SVG that names its lines', async () => {
    const { charts } = buildReport(fullResults());
    const svgs = await Promise.all(charts.map((c) => renderSvg(c.spec)));
    for (const svg of svgs) expect(svg.startsWith('<svg')).toBe(true);
    expect(svgs[0]).toContain('rate-limiter-flexible');
    expect(svgs[2]).toContain('express-rate-limit');
    expect(svgs[2]).toContain('Fastify');
    expect(svgs[4]).toContain('0.70×');
  });

  it('puts log-axis ticks at 1, 2 and 5 per decade around the data', () => {
    expect(logTicks([0.3, 45])).toEqual([0.2, 0.5, 1, 2, 5, 10, 20, 50]);
    expect(logTicks([1, 10])).toEqual([1, 2, 5, 10]);
  });

  it('rejects a results file with the field at fault named', () => {
    const results = fullResults() as unknown as { steps: Record<string, { machine: { cpus: unknown } }> };
    (results.steps['limiters'] as { machine: { cpus: unknown } }).machine.cpus = 'two';
    expect(() => parseResults(JSON.stringify(results), 'results.json')).toThrow(/^results\.json: steps\.limiters\.machine\.cpus: /);
    expect(() => parseResults('{', 'results.json')).toThrow(/^results\.json: not JSON/);
  });
});
