// The benches that print their own tables (they write no figures file): the
// report shows what each printed, less the per-round lines, under a heading and
// a note on what it measures and how to read it.
import { type Chart, throughputChart } from './charts.js';
import { image, type Section } from './comparison-sections.js';
import { measuredLine, missingOrFailed } from './measured.js';
import { type Results, sweepFiguresSchema } from './results.js';

interface PrintedBench {
  id: string;
  title: string;
  /** What it measures and how to read it: no figures here, they come from the run. */
  about: string;
  /** Decisions/s against calls in flight, on a log scale, from the figures it writes (bench/sweep.ts's shape). */
  plot?: { file: string; title: string; alt: string };
}

export const PRINTED_BENCHES: readonly PrintedBench[] = [
  {
    id: 'flexible',
    title: 'Batching client against rate-limiter-flexible, token bucket',
    about:
      '**batched** = the quota service through the quota client with its default batching (batches of up to 100 on one `AllowStream`), ' +
      'a token bucket per user over 10,000 users; **flexible** = rate-limiter-flexible `RateLimiterRedis` inside the load driver, on an ' +
      'ioredis client with auto-pipelining, the same keys. Every call is an allowed decision. The batched path spreads its work over three ' +
      "processes that run in parallel (client, service, Redis); flexible runs on the caller's one thread, so with other work on the same " +
      'cores the ratio falls. `--calls` adds a kind that sends each batch as its own `AllowBatch` call.',
  },
  {
    id: 'slices',
    title: 'One hot identity: slices against every decision in Redis',
    about:
      'One tenant-wide token bucket that never runs dry (`slices: { share: 0.05, max_units: 1000, ttl_ms: 250 }`), one identity, at 1, 4, 16 and 64 calls in flight. ' +
      '**slices** = the quota client deciding from slices it leases ([policies.md](policies.md#slices)); **no-slices** = the same client with `slices: false`; ' +
      '**flexible** = rate-limiter-flexible `RateLimiterRedis` inside the load driver on one key of the same Redis. Redis calls are the script calls Redis ran ' +
      '(INFO commandstats) per 1,000 decisions; Redis CPU is its user + system time per decision.',
    plot: {
      file: 'bench-slices.svg',
      title: 'One hot identity on one Redis: decisions/s against calls in flight',
      alt: 'Decisions per second against calls in flight for one hot identity on one Redis: the quota client with slices, without, and rate-limiter-flexible',
    },
  },
  {
    id: 'slices-cluster',
    title: "One hot identity on a Redis Cluster: the hot key's shard",
    about:
      "The same as above on a 3-master Redis Cluster: all of a hot identity's load lands on the master that serves its key, whose script calls and CPU " +
      "per decision are shown (rate-limiter-flexible's: the master serving its own key).",
    plot: {
      file: 'bench-slices-cluster.svg',
      title: 'One hot identity on a Redis Cluster: decisions/s against calls in flight',
      alt: 'Decisions per second against calls in flight for one hot identity on a Redis Cluster: the quota client with slices, without, and rate-limiter-flexible',
    },
  },
  {
    id: 'batch',
    title: 'Batching client against one Allow per call',
    about:
      '**raw** = bare nice-grpc unary `Allow`; **unary** = the quota client with `batch: false`; **batched** = its default batching. ' +
      'raw against unary shows what the client itself costs; batched against unary, what batching saves in CPU per decision in the caller and the service.',
  },
  {
    id: 'order-api',
    title: 'Order API latency with and without the limiter',
    about:
      '`POST /api/orders` through the reference order API **with** its limiter (quota client, quota service, Redis) and **without** ' +
      '(the limiter allows without asking), one request in flight: latency below saturation. Most of what the limiter adds is its two ' +
      'loopback hops, to the quota service and on to Redis: compare with the hop floor below. `--hop`, `--calls` and `--unbatched` add kinds.',
  },
  {
    id: 'unary',
    title: 'Unary Allow against a no-op gRPC server',
    about:
      'Two gRPC servers in their own processes: the quota service on Redis with a token bucket that never runs dry over 10,000 users, and ' +
      'a no-op server with the same proto that answers at once. On two cores this compares the whole machine; the load driver uses the most CPU.',
  },
  {
    id: 'rls',
    title: "Envoy's ShouldRateLimit against Allow",
    about:
      "The same service process and Redis answer Envoy's rate limit API (`ShouldRateLimit`, one descriptor) and `Allow` for the same " +
      'token bucket limit (the Node client cycles over many identities, h2load sends one), rounds alternating: decisions/s at full load, driven by h2load on one HTTP/2 ' +
      'connection as a proxy keeps one (32 calls in flight; a client in C, so the service and not the client is what saturates), and beside it a lean Node client ' +
      "at 8 calls in flight on one connection that reads each call's gRPC status (it counts the errors and the calls past the deadline, " +
      'which h2load cannot read, and saturates before the service does); then latency at half the maximum rate, sent on one ' +
      'connection by h2pace (bench/tools/h2pace.c, a client in C on nghttp2: no garbage collector of its own adds pauses), which ' +
      "sends each call at its own time, as a proxy's traffic arrives (h2load's rate mode sends the calls due every 10 ms at once, " +
      'and the last of such a burst waits behind the others on any server); it runs at a real-time priority, so that the ' +
      'service and Redis busy on the same two cores do not delay its sends, and the header line says how late they were at p99. ' +
      "Its figures are to set against Envoy's default 20 ms timeout for this call, and beside them the same calls at the same rate " +
      "to a no-op server of the same gRPC stack: the floor this machine's loopback and process wake-ups set before any decision. " +
      'Calls that come one by one are decided one by one: half the maximum reached with 32 calls in flight is more than half ' +
      'of what the service does with calls spread out, where each pays a wake-up and a script call of its own. ' +
      "Every call carries Envoy's 20 ms deadline, as Envoy sends it; a call that outlives it (answered DEADLINE_EXCEEDED, or " +
      'UNAVAILABLE by the failure mode once what is left of it for the store is spent) is what Envoy would time out: it is counted ' +
      'in its own columns, at the maximum and in the latency rounds, not as a decision or an error. ' +
      'The service runs as its image runs it (docs/operations.md, "Memory and latency"). ' +
      "The worst round shows what one stall, of this shared machine or of the service's garbage collector, does to a 4 s round; the median of the rounds is the figure.",
  },
  {
    id: 'unary-cpu',
    title: 'What one unary call costs the service',
    about:
      'The service on one Redis and a no-op server of the same gRPC stack (grpc-js, nice-grpc, the same codecs) in their own processes, ' +
      "driven by h2load (4 connections, 16 calls in flight on each): the server's CPU time per call, read from /proc, for `Allow` and for " +
      'a two-descriptor `ShouldRateLimit` (what Envoy sends), limits that never fill; then the mean latency one call at a time. ' +
      'This is what Envoy and every caller that is not the batching client pay per decision. The goal: at most 1.3 times the ' +
      "no-op's CPU per call and twice its latency. Both calls take the service's lean path (docs/architecture.md): read off their " +
      "HTTP/2 stream below grpc-js's per-call layers, which the no-op server goes through, so the service can spend less per call than the no-op.",
  },
  {
    id: 'cpu-breakdown',
    title: 'Where the CPU time of one decision goes',
    about:
      'The batching quota client (one `AllowStream`), the service and one Redis at 1, 4 and 16 calls in flight, with V8 CPU profiles of ' +
      'the caller (client and load driver) and the service: each profile summed over the measured seconds by what ran, in µs per ' +
      "decision. **gRPC + HTTP/2** is grpc-js, nice-grpc and Node's HTTP/2 (the service reads and answers its `AllowStream` itself, " +
      'below grpc-js: that reading is **service code**); **Redis I/O** is ioredis and the socket writes to Redis ' +
      '(the write system call is counted there); **native** is V8\'s "(program)": the event loop and system calls outside JavaScript. ' +
      'Set each row against the hop floor below. ' +
      "The second table runs the same points without profiles and reads the kernel's scheduler figures of each process's main " +
      "thread, per decision: time on a CPU (its JavaScript, and the kernel's work for its sockets: a loopback write runs the " +
      "receiver's TCP work too), time runnable but waiting for a core, and sleeps (each one a wake-up, that is a hop); for the caller " +
      'and the service, turns of the event loop (a turn that finds nothing to do sleeps) and bytes allocated on the JavaScript heap ' +
      "(what the garbage collector later sweeps; Buffers' memory outside the heap is not in it); and Redis's " +
      'time in the decide script per script call. With one batch in flight the caller, the service and Redis run one ' +
      'after another, so the mean time of a decision is about the sum of their times on a CPU and waiting. At one call in flight ' +
      'that sum is the whole decision: the time is CPU on a serial path of three processes, mostly paid per batch rather than per ' +
      'decision (compare 1 and 16 in flight), which is what batching shares and what a call alone pays in full. Beside each point, ' +
      'the same load on the two-hop relay of the limiters comparison (the same three processes doing nothing but the hops, no ' +
      "decision): the difference, process by process, is what the quota client's path adds to its hops. Its turns of the event loop " +
      "and sleeps are the relay's at one call in flight (one per hop) and fewer from 4 in flight on (one per batch): what it adds is " +
      'the work each turn does, in CPU and in bytes allocated. Unlike times, bytes per decision barely move with the load of the ' +
      'machine, so two versions of the path compare by them even on a busy one.',
  },
  {
    id: 'workers',
    title: 'QUOTA_WORKERS: one service process against two',
    about:
      'The service as its image runs it, once with `QUOTA_WORKERS=1` and once with `QUOTA_WORKERS=2` (two processes sharing one port, whose primary hands each h2load connection to the worker serving the fewest, two each), ' +
      'on the same Redis, rounds alternating: the most unary `ShouldRateLimit` calls (two descriptors, as Envoy sends for a route with ' +
      "two limits) each decides per second under h2load (4 connections, 16 calls in flight on each), counted from the service's own " +
      "summed metrics endpoint, so a gRPC error never counts as a decision, with the CPU the service's processes (the primary " +
      'included) and Redis spent per decision. h2load, the primary and Redis share the cores with the workers: the ratio says what ' +
      'a second core is worth on this machine, the load average how busy it was, and a CPU per decision alike for one and two ' +
      'workers that a second worker costs nothing per decision, so it adds what the machine has a core free for.',
  },
  {
    id: 'algorithms',
    title: 'Per algorithm: decisions/s and Redis memory',
    about:
      'Per algorithm, a fresh Redis and many identities, one decision each through the store (no gRPC). Memory is the `used_memory` growth ' +
      "per identity. Read decisions/s as one short script call each, not as a ranking. Most of the memory is Redis's fixed cost of a key " +
      'with an expiry, whatever the script; GCRA and the leaky bucket keep no key for an identity whose limit is full again; a sliding ' +
      'window log grows with its entries.',
  },
  {
    id: 'many-keys',
    title: 'Many keys: a million identities, then the expiries',
    about:
      'A million users each make one decision of a token bucket whose idle key lives for the TTL; then nobody reads, and the bench samples ' +
      '`DBSIZE` and memory until no key is left. Budget `used_memory per key` per recently active identity of one token bucket limit, plus ' +
      'allocator overhead (rss). Expiry alone brings the count to zero.',
  },
  {
    id: 'hop-floor',
    title: 'One loopback hop',
    about:
      'One request in flight to an echo server: a TCP round trip, a grpc-js unary call, and a message on one open grpc-js stream (what the ' +
      "quota client's `AllowStream` rides on). The order API's added latency is judged against these floors.",
  },
  {
    id: 'resp-decode',
    title: 'Reading one batch reply',
    about:
      'What reading one reply of a batch of 100 decisions costs the service: the binary string the batch script returns, against the same ' +
      'decisions as a RESP array.',
  },
  {
    id: 'script-instructions',
    title: "Redis's instructions per decision",
    about:
      'What Redis itself executes per decision, counted in instructions by valgrind (callgrind) rather than timed, so the figure does not ' +
      'move with the load of the machine: the decide library loaded as the service loads it, script calls as the service sends them ' +
      '(the runtime-overrides check included, no override set), one decision alone (as at one call in flight) and batches of 8 and 64, ' +
      'for a token bucket and a fixed window over 10,000 users whose limits never fill. Counted from reading a script call to writing its ' +
      'reply: networking, argument parsing, the Lua call and the commands it runs. Under valgrind Redis runs many times slower, so the ' +
      "counts are its work, not its speed; Redis's own timers add a little that depends on how long a row takes.",
  },
  {
    id: 'sizes',
    title: 'Package sizes',
    about: 'What each package in clients/ weighs as npm would publish it (packed tarball, unpacked files), from the builds of the same run.',
  },
];

/** The benches `make bench` does not run, with what they measure. */
export const BY_HAND = [
  ['`npx tsx bench/store-batch.ts`', 'the store alone, waves of 100 decisions: batched against one script call per decision'],
  ['`npx tsx bench/service-path-run.ts`', "the service's own CPU and garbage per decision, store and network left out"],
  ['`npx tsx bench/client-profile.ts`', 'only the batching client, to profile its CPU per decision (`node --cpu-prof`)'],
  [
    '`npx tsx bench/ab/main.ts HEAD worktree [--unary] [--http fastify]`',
    'two revisions of the decision path in one run, each built apart with its own quota client, each step measured on a service process of each back to back: decisions/s, p50 and CPU per decision of caller, service and Redis, and the bytes the service allocates on its heap per decision, a figure the machine’s load barely moves (with `--unary`, unary Allow and ShouldRateLimit by h2load, with the service’s CPU and heap bytes per call; with `--http`, the order route through each revision’s HTTP adapter), each figure B / A of the medians and of each back-to-back pair, a side named only when the pairs favour it beyond chance (a sign test), and every sample',
  ],
] as const;

export function printedSection(results: Results, bench: PrintedBench): Section {
  const step = results.steps[bench.id];
  const trouble = missingOrFailed(step, 'make bench');
  const body = step === undefined ? '' : printedOutput(step.output);
  const figures = bench.plot === undefined ? undefined : sweepFiguresSchema.safeParse(step?.figures);
  const charts: Chart[] =
    bench.plot !== undefined && figures?.success === true
      ? [throughputChart(figures.data, { ...bench.plot, xTitle: 'calls in flight (closed loop)', yTitle: 'decisions/s (log scale)', logY: true })]
      : [];
  const images = charts.map(image).join('\n\n');
  const markdown = [`### ${bench.title}`, bench.about, trouble ?? (step === undefined ? '' : measuredLine(step)), images, body]
    .filter((p) => p !== '')
    .join('\n\n');
  return { markdown, charts };
}

/**
 * A bench's stdout as markdown: its tables as tables, its other lines (the
 * setup it describes first, the ratios after) as text blocks; the per-round
 * lines are dropped (the medians say it).
 */
export function printedOutput(output: string): string {
  const lines = output
    .split('\n')
    .filter((line) => !/^round \d+ /.test(line))
    // A bench's pass/fail mark against its development target, and the port of its throwaway Redis, say nothing to a reader.
    .map((line) => line.replace(/\s+target [<>]=? [\d.]+( ms)?: (NOT )?MET/, '').replace(/(redis:\/\/127\.0\.0\.1):\d+/g, '$1'));
  const blocks: string[] = [];
  let table: string[] = [];
  let text: string[] = [];
  const flush = () => {
    if (table.length > 0) blocks.push(table.join('\n'));
    // Dropped round lines leave runs of blank lines: one is enough.
    const trimmed = text
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
    if (trimmed !== '') blocks.push(`\`\`\`text\n${trimmed}\n\`\`\``);
    table = [];
    text = [];
  };
  for (const line of lines) {
    if (line.startsWith('|')) {
      if (text.length > 0) flush();
      table.push(line.trimEnd());
    } else {
      if (table.length > 0) flush();
      text.push(line.trimEnd());
    }
  }
  flush();
  return blocks.join('\n\n');
}
