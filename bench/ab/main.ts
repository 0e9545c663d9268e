// Two revisions of the decision path measured in one run, so that a change is
// set against what it changes on the same machine in the same minutes (figures
// of separate runs on a shared machine differ by more than most changes do).
// Each revision is built apart (bench/ab/revision.ts: its service, its bench
// servers and its quota client), and runs `--instances` service processes on
// one Redis. The run is a list of steps, each measured on an instance of A and
// one of B back to back (which goes first alternates: A B B A ...), so that every
// sample of A has one of B taken under the same conditions: a pair. The steps:
// - stream: the revision's quota client (batching, one AllowStream) in a process
//   of its own, up for the whole run, at each of `--concurrencies` in flight:
//   decisions/s, p50, CPU per decision of the caller, the service and Redis, and
//   the bytes the service allocates on its heap per decision (a figure the
//   machine's load barely moves; none from a revision older than that count);
// - with `--unary` (h2load): unary Allow at 1 in flight (mean latency), and Allow
//   and ShouldRateLimit at h2load -c 4 -m 16 (calls/s, service CPU and heap bytes
//   allocated per call);
// - with `--http express|fastify`: POST /api/orders through that framework and the
//   revision's HTTP adapter and quota client, in front of each instance, at each of
//   `--concurrencies`: requests/s, p50, CPU per request of route, service and Redis.
// Prints per figure the median of each revision, B / A, the pairs' ratios, a
// verdict only when the pairs favour a side beyond chance (a sign test), and
// every sample.
//
//   npx tsx bench/ab/main.ts <A> <B> [--concurrencies 1,4,16] [--unary] [--http express|fastify] [--rounds 3] [--seconds 3] [--instances 2]
//
// A revision is anything git names (HEAD~1, a branch, a commit) or `worktree`: the
// working tree as it is now, new files included. Not run by `make bench`.
import { copyFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../test/support/redis-server.js';
import { benchMain, type BenchRun } from '../bench-main.js';
import { startServerChild } from '../children.js';
import { h2loadAvailable } from '../h2load.js';
import { Comparison } from './compare.js';
import { buildRevision, type Revision } from './revision.js';
import { httpStep, type Instance, type Step, streamStep, unaryLatencyStep, unaryLoadStep, visitOrder } from './scenarios.js';
import { CALLER, StreamCaller } from './stream-caller.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const USAGE =
  'usage: npx tsx bench/ab/main.ts <A> <B> [--concurrencies 1,4,16] [--unary] [--http express|fastify] [--rounds 3] [--seconds 3] [--instances 2]\n' +
  '  <A>, <B>  git revisions (HEAD~1, a branch, a commit) or `worktree` (the working tree as it is)';

function parseOptions(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      concurrencies: { type: 'string', default: '1,4,16' },
      unary: { type: 'boolean', default: false },
      http: { type: 'string' },
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '3' },
      instances: { type: 'string', default: '2' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const whole = (flag: string, text: string, max: number) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`--${flag} must be a whole number from 1 to ${max}, got "${text}"\n${USAGE}`);
    return n;
  };
  if (positionals.length !== 2) throw new Error(USAGE);
  if (values.http !== undefined && values.http !== 'express' && values.http !== 'fastify')
    throw new Error(`--http must be express or fastify, got "${values.http}"\n${USAGE}`);
  return {
    revisions: positionals as [string, string],
    concurrencies: values.concurrencies.split(',').map((c) => whole('concurrencies', c.trim(), 1024)),
    unary: values.unary,
    http: values.http,
    rounds: whole('rounds', values.rounds, 20),
    seconds: whole('seconds', values.seconds, 60),
    instances: whole('instances', values.instances, 4),
  };
}

type Options = ReturnType<typeof parseOptions>;

/**
 * `options.instances` service processes of each revision on `redisUrl`, each with
 * its revision's stream caller (and with --http a route server in front), as
 * pairs: instance i of A with instance i of B.
 */
async function startPairs(run: BenchRun, [a, b]: [Revision, Revision], redisUrl: string, options: Options): Promise<Array<[Instance, Instance]>> {
  const start = async (side: 'a' | 'b', revision: Revision, i: number): Promise<Instance> => {
    const service = await startServerChild(`${side}${i} service`, 'quota-server.ts', [redisUrl], { builtIn: revision.dir });
    run.onCleanup(() => service.stop());
    const caller = new StreamCaller(revision.name, revision.dir, service.port);
    run.onCleanup(() => caller.close());
    const instance: Instance = { side, revision, port: service.port, pid: service.pid!, counters: service.counters, caller };
    if (options.http !== undefined) {
      const args = [options.http, 'quota', String(service.port), redisUrl];
      const route = await startServerChild(`${side}${i} route`, 'http-route-server.ts', args, { builtIn: revision.dir });
      run.onCleanup(() => route.stop());
      instance.route = { port: route.port, pid: route.pid! };
    }
    return instance;
  };
  const pairs: Array<[Instance, Instance]> = [];
  for (let i = 0; i < options.instances; i++) pairs.push([await start('a', a, i), await start('b', b, i)]);
  return pairs;
}

/** Every step of a round, in order. */
function stepsOf(options: Options, redis: Redis, into: Comparison): Step[] {
  const { concurrencies, seconds } = options;
  return [
    ...concurrencies.map((c) => streamStep(c, seconds, redis, into)),
    ...(options.unary ? [unaryLatencyStep(seconds, into), unaryLoadStep('Allow', seconds, into), unaryLoadStep('ShouldRateLimit', seconds, into)] : []),
    ...(options.http === undefined ? [] : concurrencies.map((c) => httpStep(c, seconds, redis, into))),
  ];
}

async function main(run: BenchRun): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options.unary && !h2loadAvailable()) throw new Error('--unary needs h2load (make h2load installs it)');
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const revisions: [Revision, Revision] = [
    await buildRevision(REPO_ROOT, options.revisions[0], log),
    await buildRevision(REPO_ROOT, options.revisions[1], log),
  ];
  for (const revision of revisions) await copyFile(join(REPO_ROOT, 'bench', 'ab', 'caller.mjs'), join(revision.dir, CALLER));
  const [a, b] = revisions;

  const server = await startRedisServer();
  run.onCleanup(() => server.stop());
  const redis = new Redis(server.url);
  run.onCleanup(() => redis.disconnect());
  const pairs = await startPairs(run, revisions, server.url, options);
  process.stdout.write(
    `A = ${a.name} (${a.commit.slice(0, 12)}), B = ${b.name} (${b.commit.slice(0, 12)}); ${options.instances} service processes each on one Redis; ` +
      `${options.rounds} rounds x ${options.seconds} s per step and instance, each step on A and B back to back; stream at ${options.concurrencies.join(', ')} in flight` +
      `${options.unary ? '; unary by h2load' : ''}${options.http === undefined ? '' : `; HTTP on ${options.http}`}; ` +
      `node ${process.version}, ${cpus().length} cpus, load average ${loadavg()[0]!.toFixed(2)}\n\n`,
  );
  const comparison = new Comparison();
  const steps = stepsOf(options, redis, comparison);
  for (let round = 0; round < options.rounds; round++) {
    for (const [i, step] of steps.entries()) {
      for (const instance of visitOrder(pairs, round, i)) await step.run(instance);
    }
  }
  process.stdout.write(
    `${comparison.table(`A ${a.name}`, `B ${b.name}`)}\n\n` +
      "Each verdict is its own figure's sign test at p < 0.05: of 20 figures a change left alone, about one names a side by chance. " +
      'Believe a change that shows in the figures it should move together (decisions/s with CPU per decision), or again in a second run.\n' +
      `load average after: ${loadavg()[0]!.toFixed(2)}\n`,
  );
  return 0;
}

benchMain(main);
