// Two revisions of the decision path measured in one run, rounds alternating, so
// that a change is set against what it changes on the same machine in the same
// minutes (figures of separate runs on a shared machine differ by more than most
// changes do). Each revision is built apart (bench/ab/revision.ts: its service,
// its bench servers and its quota client), and runs `--instances` service
// processes on one Redis; each round visits every instance of both, in an order
// that alternates. Measured per instance and round:
// - stream: the revision's quota client (batching, one AllowStream) in a process of
//   its own, at each of `--concurrencies` in flight: decisions/s, p50, and CPU per
//   decision of the caller, the service and Redis;
// - with `--unary` (h2load): unary Allow at 1 in flight (mean latency), and Allow
//   and ShouldRateLimit at h2load -c 4 -m 16 (calls/s, service CPU per call).
// Prints per figure the median of each revision, B / A, and every sample.
//
//   npx tsx bench/ab/main.ts <A> <B> [--concurrencies 1,4,16] [--unary] [--rounds 3] [--seconds 3] [--instances 2]
//
// A revision is anything git names (HEAD~1, a branch, a commit) or `worktree`: the
// working tree as it is now, new files included. Not run by `make bench`.
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { AllowRequest } from '@quota-service/contract';
import { own } from '../../test/support/owned-child.js';
import { startRedisServer } from '../../test/support/redis-server.js';
import { rlsRequestBytes } from '../../test/support/rls-client.js';
import { benchMain, type BenchRun } from '../bench-main.js';
import { processCpuMs, redisCpuMs } from '../cpu.js';
import { grpcFrame, h2loadAvailable, h2loadClosedLoop } from '../h2load.js';
import { Comparison } from './compare.js';
import { benchServer, buildRevision, type Revision } from './revision.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const USAGE =
  'usage: npx tsx bench/ab/main.ts <A> <B> [--concurrencies 1,4,16] [--unary] [--rounds 3] [--seconds 3] [--instances 2]\n' +
  '  <A>, <B>  git revisions (HEAD~1, a branch, a commit) or `worktree` (the working tree as it is)';
const CALLER = 'ab-caller.mjs';

/** A service process of one revision. */
interface Instance {
  side: 'a' | 'b';
  revision: Revision;
  port: number;
  pid: number;
}

const UNARY = {
  Allow: {
    path: '/quota.v1.QuotaService/Allow',
    frame: grpcFrame(AllowRequest.encode({ policy: 'bench', identity: { user: 'ab-user' }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }).finish()),
  },
  ShouldRateLimit: {
    path: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    frame: grpcFrame(rlsRequestBytes({ domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: 'ab-user' }] }] })),
  },
} as const;

function parseOptions(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      concurrencies: { type: 'string', default: '1,4,16' },
      unary: { type: 'boolean', default: false },
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
  return {
    revisions: positionals as [string, string],
    concurrencies: values.concurrencies.split(',').map((c) => whole('concurrencies', c.trim(), 1024)),
    unary: values.unary,
    rounds: whole('rounds', values.rounds, 20),
    seconds: whole('seconds', values.seconds, 60),
    instances: whole('instances', values.instances, 4),
  };
}

/** A quota service of `revision` on `redisUrl`, with the Node flags its image gives it; resolves once it printed `port=<n>`. */
async function startService(run: BenchRun, revision: Revision, redisUrl: string): Promise<{ child: ChildProcess; port: number }> {
  const script = benchServer(revision, 'quota-server.js');
  const child = spawn(process.execPath, ['--max-semi-space-size=32', script, redisUrl], { stdio: ['pipe', 'pipe', 'inherit'] });
  const owner = own(child);
  run.onCleanup(() => owner.stop(3_000));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /^port=(\d+)$/m.exec(out);
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', (code) => reject(new Error(`${script} exited (code ${String(code)}) before listening`)));
  });
  return { child, port };
}

/** The stream figures of one instance at every concurrency: the revision's caller in a child process, CPU sampled around its measured seconds. */
async function streamRound(instance: Instance, redis: Redis, options: { concurrencies: number[]; seconds: number }, into: Comparison): Promise<void> {
  const caller = spawn(
    process.execPath,
    [join(instance.revision.dir, CALLER), String(instance.port), String(options.seconds), options.concurrencies.join(',')],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<number | null>((resolve) => caller.once('exit', resolve));
  let before = { service: 0, redis: 0 };
  for await (const line of createInterface({ input: caller.stdout! })) {
    const message = JSON.parse(line) as { start?: number; concurrency: number; decisionsPerSecond: number; p50Ms: number; callerCpuUs: number; calls: number };
    if (message.start !== undefined) {
      before = { service: processCpuMs(instance.pid), redis: await redisCpuMs(redis) };
      continue;
    }
    const perCall = (ms: number) => (ms * 1000) / message.calls;
    const at = `${message.concurrency} in flight`;
    into.add(`stream ${at}: decisions/s`, true, instance.side, message.decisionsPerSecond);
    into.add(`stream ${at}: p50 ms`, false, instance.side, message.p50Ms);
    into.add(`stream ${at}: caller CPU µs/decision`, false, instance.side, message.callerCpuUs);
    into.add(`stream ${at}: service CPU µs/decision`, false, instance.side, perCall(processCpuMs(instance.pid) - before.service));
    into.add(`stream ${at}: Redis CPU µs/decision`, false, instance.side, perCall((await redisCpuMs(redis)) - before.redis));
  }
  const code = await exited;
  if (code !== 0) throw new Error(`the caller of ${instance.revision.name} exited with ${String(code)}`);
}

/** Unary figures of one instance by h2load: Allow's mean latency at 1 in flight; Allow and ShouldRateLimit at -c 4 -m 16. */
async function unaryRound(instance: Instance, seconds: number, into: Comparison): Promise<void> {
  const url = (path: string) => `http://127.0.0.1:${instance.port}${path}`;
  const alone = await h2loadClosedLoop(url(UNARY.Allow.path), UNARY.Allow.frame, { clients: 1, streams: 1, seconds });
  into.add('unary Allow at 1 in flight: mean latency ms', false, instance.side, alone.meanLatencyMs);
  for (const [name, { path, frame }] of Object.entries(UNARY)) {
    const before = processCpuMs(instance.pid);
    const loaded = await h2loadClosedLoop(url(path), frame, { clients: 4, streams: 16, seconds });
    into.add(`unary ${name} -c 4 -m 16: calls/s`, true, instance.side, loaded.succeeded / seconds);
    into.add(`unary ${name} -c 4 -m 16: service CPU µs/call`, false, instance.side, ((processCpuMs(instance.pid) - before) * 1000) / loaded.succeeded);
  }
}

async function main(run: BenchRun): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options.unary && !h2loadAvailable()) throw new Error('--unary needs h2load (make h2load installs it)');
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const [a, b] = [await buildRevision(REPO_ROOT, options.revisions[0], log), await buildRevision(REPO_ROOT, options.revisions[1], log)];
  for (const revision of [a, b]) await copyFile(join(REPO_ROOT, 'bench', 'ab', 'caller.mjs'), join(revision.dir, CALLER));

  const server = await startRedisServer();
  run.onCleanup(() => server.stop());
  const redis = new Redis(server.url);
  run.onCleanup(() => redis.disconnect());
  const instances: Instance[] = [];
  for (let i = 0; i < options.instances; i++) {
    for (const [side, revision] of [['a', a] as const, ['b', b] as const]) {
      const { child, port } = await startService(run, revision, server.url);
      instances.push({ side, revision, port, pid: child.pid! });
    }
  }
  process.stdout.write(
    `A = ${a.name} (${a.commit.slice(0, 12)}), B = ${b.name} (${b.commit.slice(0, 12)}); ${options.instances} service processes each on one Redis; ` +
      `${options.rounds} rounds x ${options.seconds} s per figure and instance, order alternating; stream at ${options.concurrencies.join(', ')} in flight` +
      `${options.unary ? '; unary by h2load' : ''}; node ${process.version}, ${cpus().length} cpus, load average ${loadavg()[0]!.toFixed(2)}\n\n`,
  );
  const comparison = new Comparison();
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? instances : [...instances].reverse();
    for (const instance of order) {
      await streamRound(instance, redis, options, comparison);
      if (options.unary) await unaryRound(instance, options.seconds, comparison);
    }
  }
  process.stdout.write(`${comparison.table(`A ${a.name}`, `B ${b.name}`)}\n\nload average after: ${loadavg()[0]!.toFixed(2)}\n`);
  return 0;
}

benchMain(main);
