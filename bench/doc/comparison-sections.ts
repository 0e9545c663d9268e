// The two plotted comparisons: limiters in the caller's process
// (bench/limiters-run.ts) and behind an HTTP route (bench/http-limiters-run.ts).
import { formatSweepTable, ratioRow, type SweepMedian, sweepMedians } from '../sweep-table.js';
import { type Chart, latencyChart, throughputChart } from './charts.js';
import { measuredLine, missingOrFailed } from './measured.js';
import { type Results, type SweepFigures, sweepFiguresSchema } from './results.js';

export interface Section {
  markdown: string;
  charts: Chart[];
}

/** The step's figures if it ran and wrote readable ones; otherwise what the section says instead. */
function sweepOf(results: Results, id: string, target: 'make bench' | 'make bench-quick'): { figures: SweepFigures; head: string } | { text: string } {
  const step = results.steps[id];
  const trouble = missingOrFailed(step, target);
  const parsed = sweepFiguresSchema.safeParse(step?.figures);
  if (step === undefined || !parsed.success) {
    const why = step !== undefined && !parsed.success ? `\n\nIts figures file could not be read: ${parsed.error.issues[0]?.message ?? 'invalid'}.` : '';
    return { text: `${trouble ?? measuredLine(step as NonNullable<typeof step>)}${why}` };
  }
  return { figures: parsed.data, head: trouble ?? measuredLine(step) };
}

export function image(chart: Chart): string {
  return `![${chart.alt}](img/${chart.file})`;
}

function versionsLine(figures: SweepFigures): string {
  const entries = Object.entries(figures.versions ?? {});
  return entries.length === 0 ? '' : `Versions: ${entries.map(([name, version]) => `${name} ${version}`).join(', ')}.`;
}

/** The quota client's p50 at one call in flight against the floor of its two hops measured in the same run, when the run has both. */
function floorLine(figures: SweepFigures, medians: readonly SweepMedian[], kind: string | undefined): string {
  const alone = medians.find((m) => m.kind === kind && m.concurrency === 1);
  if (figures.floor === undefined || alone === undefined) return '';
  const { streamHopMs, redisRoundTripMs } = figures.floor;
  const sum = streamHopMs + redisRoundTripMs;
  return (
    `At 1 in flight the quota client answers in p50 ${alone.p50Ms.toFixed(3)} ms. The floor of its two hops, measured in the same run ` +
    `with one call in flight: a message on an open grpc-js stream to an echo server, ${streamHopMs.toFixed(3)} ms, plus a Redis round ` +
    `trip (PING), ${redisRoundTripMs.toFixed(3)} ms: ${sum.toFixed(3)} ms. The client takes ${(alone.p50Ms / sum).toFixed(2)}× that floor; ` +
    'the rest is the work of the client, the service and the decide script (see "Where the CPU time of one decision goes").'
  );
}

type Kind = SweepFigures['kinds'][number];

/** At one call in flight: the relay's and the quota client's decisions/s against the other limiter's, when the run has the relay. */
function relayLine(medians: readonly SweepMedian[], ours?: Kind, theirs?: Kind, relay?: Kind): string {
  const at = (kind: Kind | undefined, concurrency: number) =>
    medians.find((m) => m.kind === kind?.id && m.concurrency === concurrency)?.decisionsPerSecond ?? 0;
  const [q, f, r] = [at(ours, 1), at(theirs, 1), at(relay, 1)];
  if (q === 0 || f === 0 || r === 0) return '';
  const passing = [...new Set(medians.map((m) => m.concurrency))]
    .sort((a, b) => a - b)
    .find((_concurrency, i, all) => all.slice(i).every((c) => at(ours, c) > at(relay, c)));
  const passes = passing === undefined ? '' : ` From ${passing} calls in flight on, the batching client passes the relay, which sends every call alone.`;
  return (
    `At 1 in flight the two-hop relay reaches ${(r / f).toFixed(2)}× the decisions/s of ${theirs?.label}: what its second hop alone costs. ` +
    `The quota client reaches ${(q / f).toFixed(2)}×, that is ${(q / r).toFixed(2)}× the relay: the rest is the work of the client, the ` +
    `service and the decide script on top of the two hops.${passes}`
  );
}

export function limitersSection(results: Results): Section {
  const intro = [
    '## The quota client against rate-limiter-flexible',
    "Both limiters run in the caller's process and decide on one Redis. **quota client (batched)** = `@quota-service/client` with its " +
      'default batching (a call goes at once when no batch is in flight; behind one, the calls made together go as a second batch and a call made alone rides the next; on one `AllowStream`) to the quota service, which decides in ' +
      'Redis; **rate-limiter-flexible** = `RateLimiterRedis` as its README sets it up on ioredis (auto-pipelining on). Both keep a fixed ' +
      'window per user over 10,000 users that never fills, so every call is an allowed decision of the same algorithm. ' +
      "**two-hop relay (floor)** = the quota client's path with nothing of the quota service on it, only its two hops: a message on " +
      'an open grpc-js stream to a Node process that answers it once one Redis command (HINCRBY of a per-user hash, on ioredis as the ' +
      'service uses it) has answered. It decides nothing and does not batch: at one call in flight it is the most any limiter behind a ' +
      'service of its own can reach on this machine, and its ratio to rate-limiter-flexible there is what the second hop alone costs.',
  ].join('\n\n');
  const got = sweepOf(results, 'limiters', 'make bench-quick');
  if ('text' in got) return { markdown: `${intro}\n\n${got.text}`, charts: [] };
  const { figures, head } = got;
  const charts = [
    throughputChart(figures, {
      file: 'bench-limiters-throughput.svg',
      title: 'Decisions/s against calls in flight',
      xTitle: 'calls in flight (closed loop)',
      yTitle: 'decisions/s',
      alt: 'Line chart: decisions/s of the quota client, of rate-limiter-flexible and of the two-hop relay against calls in flight',
    }),
    latencyChart(figures, {
      file: 'bench-limiters-latency.svg',
      title: 'Latency against load (p50 solid, p99 dashed; numbers: calls in flight)',
      xTitle: 'decisions/s reached',
      alt: 'Line chart: p50 and p99 latency of each limiter against the decisions/s it reached',
    }),
  ];
  const medians = sweepMedians(
    figures.points,
    figures.kinds.map((k) => k.id),
  );
  const labels = new Map(figures.kinds.map((k) => [k.id, k.label]));
  const table = formatSweepTable(medians, labels);
  const [ours, theirs, relay] = figures.kinds;
  const ratio =
    theirs === undefined
      ? ''
      : [ours, relay]
          .filter((kind) => kind !== undefined)
          .map((kind) => ratioRow(medians, kind.id, theirs.id, `${kind.label} / ${theirs.label}`))
          .join('\n');
  const markdown = [
    intro,
    head,
    ...charts.map(image),
    `Medians over the rounds, decisions/s (p99):\n\n${table}${ratio === '' ? '' : `\n${ratio}`}`,
    floorLine(figures, medians, ours?.id),
    relayLine(medians, ours, theirs, relay),
    versionsLine(figures),
    'The batched path spreads each decision over three processes (caller, quota service, Redis) and two loopback hops; ' +
      "rate-limiter-flexible takes one hop from the caller's thread. With few calls in flight the hops set the pace; with many, batching " +
      'shares each hop and script call among the calls that wait together. Both need free cores: on a busy machine every figure falls, the ' +
      'three-process path the most. On a virtual machine whose idle cores halt, each hop that wakes a process on an idle core waits for ' +
      'the hypervisor to run that core again: on the 2 × Intel Xeon virtual machine of 2026-11-28 (`npx tsx bench/limiters-run.ts --concurrencies 1,4,16`), ' +
      'letting idle cores poll for 200 µs before halting (`guest_halt_poll_ns`) made both limiters about four times faster at 1 call in flight (the quota client 1,357 → 5,442 decisions/s, rate-limiter-flexible 5,524 → 20,943) and ' +
      'left their ratio where it was (0.25× → 0.26×; 0.34× → 0.41× at 4, 0.59× → 0.54× at 16 in flight): the absolute figures at low ' +
      'concurrency say as much about the host as about the limiters.',
  ];
  return { markdown: markdown.filter((p) => p !== '').join('\n\n'), charts };
}

export function httpSection(results: Results): Section {
  const intro = [
    '## Behind an HTTP route: Express and Fastify',
    'One route, `POST /api/orders` answering 201 with a small JSON body, in a process of its own, on Express and on Fastify, behind: ' +
      '**no limiter** (the baseline); **quota service** = `@quota-service/http` (Express middleware, Fastify `onRequest` hook) with the ' +
      'quota client batching as it does by default, the quota service, Redis; **express-rate-limit** with **rate-limit-redis** on Express, ' +
      '**@fastify/rate-limit** with its Redis store on Fastify, each on ioredis as its README shows. Every limiter keeps a fixed window ' +
      'per user (taken from a request header, as an authentication layer would set it) over 10,000 users, on one Redis, never full. ' +
      'The load keeps one keep-alive connection per request in flight.',
  ].join('\n\n');
  const got = sweepOf(results, 'http-limiters', 'make bench-quick');
  if ('text' in got) return { markdown: `${intro}\n\n${got.text}`, charts: [] };
  const { figures, head } = got;
  const charts = [
    throughputChart(figures, {
      file: 'bench-http-throughput.svg',
      title: 'Requests/s against requests in flight',
      xTitle: 'requests in flight (closed loop)',
      yTitle: 'requests/s',
      alt: 'Line charts for Express and Fastify: requests/s with no limiter, the quota service and the framework limiter against requests in flight',
    }),
    latencyChart(figures, {
      file: 'bench-http-latency.svg',
      title: 'Latency against load (p50 solid, p99 dashed; numbers: requests in flight)',
      xTitle: 'requests/s reached',
      alt: 'Line charts for Express and Fastify: p50 and p99 latency of each limiter against the requests/s it reached',
    }),
  ];
  const medians = sweepMedians(
    figures.points,
    figures.kinds.map((k) => k.id),
  );
  const labels = new Map(figures.kinds.map((k) => [k.id, k.label]));
  const concurrencies = [...new Set(medians.map((m) => m.concurrency))].sort((a, b) => a - b);
  const shares = [...new Set(figures.kinds.map((k) => k.group ?? ''))].flatMap((group) => {
    const mine = figures.kinds.filter((k) => (k.group ?? '') === group);
    const bare = mine.find((k) => k.series === 'no limiter');
    return bare === undefined ? [] : mine.filter((k) => k !== bare).map((k) => ratioRow(medians, k.id, bare.id, k.label));
  });
  const shareTable =
    shares.length === 0
      ? ''
      : `Share of the same route's requests/s without a limiter:\n\n| limiter | ${concurrencies.map((c) => `${c} in flight`).join(' | ')} |\n` +
        `|---|${concurrencies.map(() => '---:').join('|')}|\n${shares.join('\n')}`;
  const markdown = [
    intro,
    head,
    ...charts.map(image),
    `Medians over the rounds, requests/s (p99):\n\n${formatSweepTable(medians, labels)}`,
    shareTable,
    versionsLine(figures),
    'Each request through the quota service takes two more loopback hops (to the service, on to Redis) than the bare route, and the ' +
      "frameworks' own limiters one (to Redis). What the quota service buys for its hop: one place for every policy, all-or-nothing " +
      'multi-limit decisions, failure modes, and batching that shares that hop among the requests in flight together.',
    'With a few requests in flight, each on its own connection, requests reach the quota client one by one: the first goes to the ' +
      'service at once, and those that come while its answer is on the way wait for it and then go together (a call made alone behind ' +
      "a batch in flight rides the next), up to a round trip longer than a lone request, where the frameworks' limiters send each " +
      "request's command at once. So at 4 in flight the quota service's share can fall below its share at 1, while the bare route's " +
      'rate climbs steeply. Sending each request without waiting would shorten that wait, but under load it splits the requests into ' +
      'more and smaller batches, each a message, a decode and a script call: where the route, the quota service and Redis share a few ' +
      'cores, as here, that costs more from 16 in flight on than it gains at 4.',
  ];
  return { markdown: markdown.filter((p) => p !== '').join('\n\n'), charts };
}
