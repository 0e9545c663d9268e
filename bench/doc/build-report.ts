// docs/benchmarks.md from a results file: pure (results in, markdown and plot
// specs out), so it can be tested, and rendered again without measuring again.
import type { Chart } from './charts.js';
import { clusterSection } from './cluster-section.js';
import { httpSection, limitersSection } from './comparison-sections.js';
import { BY_HAND, PRINTED_BENCHES, printedSection } from './printed-sections.js';
import type { Results } from './results.js';

export interface Report {
  markdown: string;
  /** To render into docs/img/, each under its file name. */
  charts: Chart[];
}

const HEADER = `# Benchmarks

<!-- Written by make bench / make bench-quick (bench/suite/) from docs/benchmarks.json; the text is in bench/doc/. -->

\`make bench\` builds what it needs, runs every bench below one after the other (each in its own process, each
stopping the servers and Redis it started, on error or Ctrl-C too), and writes this page and its plots (docs/img/).
It takes about 25 minutes. \`make bench-quick\` measures only the plotted comparisons, with fewer points, one round
and shorter steps, in about three minutes; the other sections keep their earlier figures and dates.
\`make bench-report\` writes the page again from the last results without measuring. A status line on stderr says
what is running. Set \`BENCH_NOTE\` to say what else ran on the machine; it goes into every section's machine line.

**How to read the figures.** Each bench runs what it compares in the same run, kinds alternating, and reports medians
over the rounds: compare kinds within one section, not across sections, runs or machines. Every section says which
command measured it, when, and on what machine with what load average. "µs/call" is the CPU time each process spent
per call (load driver, server, Redis from \`INFO cpu\`). To run one bench by hand, \`make build\` first (the packages
in clients/ run from their builds), then the command shown under its section.

**Load.** The comparisons use a closed loop: N callers each keep one call in flight and send the next when it is
answered, for several N. One sweep then gives both plots: decisions/s against calls in flight, and latency against
the throughput each N reached. Each point is a steady state the limiter sustains. A fixed-rate (open) loop would
measure, past a limiter's capacity, only the queue it builds, and on two cores shared with the load generator, the
generator's own timer jitter would be part of every latency at high rates. The price: a closed loop understates the
tail when the server stalls, because the callers wait instead of piling up; read a p99 as what N concurrent callers
see, not what an unbounded stream of arrivals would.`;

export function buildReport(results: Results): Report {
  const plotted = [limitersSection(results), httpSection(results), clusterSection(results)];
  const printed = PRINTED_BENCHES.map((bench) => printedSection(results, bench));
  const byHand = `### Not run by \`make bench\`\n\n| command | measures |\n|---|---|\n${BY_HAND.map(([command, what]) => `| ${command} | ${what} |`).join('\n')}`;
  const markdown = [
    HEADER,
    ...plotted.map((s) => s.markdown),
    '## More benches\n\nEach prints its own tables; shown here as printed, less the per-round lines.',
    ...printed.map((s) => s.markdown),
    byHand,
  ].join('\n\n');
  return { markdown: `${markdown}\n`, charts: [...plotted, ...printed].flatMap((s) => s.charts) };
}
