// Where the CPU time of one decision goes, caller, service and Redis, at 1, 4
// and 16 calls in flight through the batching quota client: bench/client-profile.ts
// runs each point with V8 CPU profiles of itself (the client and the load
// driver) and of the service, and this bench sums each profile's samples inside
// the measured window by what they ran (gRPC and HTTP/2, protobuf, ioredis and
// the socket writes, our code by layer, garbage collection), in µs per decision.
// Then each point once more without profiles, for what a latency is made of:
// per decision, each process's main thread on a CPU and waiting for one, how
// often it slept (each sleep is a wake-up: a hop), the caller's and the
// service's event-loop turns and bytes allocated on the JavaScript heap, and
// Redis's time in the decide script per script call, set against the mean
// time of a decision;
// and the same for the two-hop relay (bench/limiters-run.ts) under the same
// load, what the three processes spend on the hops alone.
//
//   npx tsx bench/cpu-breakdown.ts [--concurrencies 1,4,16] [--seconds 4]
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchMain, type BenchRun } from './bench-main.js';
import { categoryOf, CATEGORIES, type Category } from './profile-categories.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string } }>;
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** µs of each category inside [from, to] (µs, the monotonic clock the profile's times are on). */
function categoryTimes(profile: CpuProfile, from: number, to: number): Map<Category, number> {
  const categoryOfNode = new Map(profile.nodes.map((node) => [node.id, categoryOf(node.callFrame.functionName, node.callFrame.url)]));
  const times = new Map<Category, number>();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at < from || at > to) continue;
    const category = categoryOfNode.get(profile.samples[i]!)!;
    times.set(category, (times.get(category) ?? 0) + delta);
  }
  return times;
}

/**
 * The main thread's times inside [from, to]: the profile busiest there (tsx's
 * module loader has a thread, and a profile, of its own, busiest at startup).
 */
async function mainThreadTimes(dir: string, from: number, to: number): Promise<Map<Category, number>> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  const profiles = await Promise.all(files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8')) as CpuProfile));
  const busy = (times: Map<Category, number>) => CATEGORIES.reduce((sum, c) => sum + (times.get(c) ?? 0), 0);
  const busiest = profiles.map((profile) => categoryTimes(profile, from, to)).sort((a, b) => busy(b) - busy(a))[0];
  if (busiest === undefined) throw new Error(`no CPU profile in ${dir}`);
  return busiest;
}

function run(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`client-profile exited with ${code}:\n${out}`))));
  });
}

async function main(run_: BenchRun): Promise<number> {
  const { values } = parseArgs({
    options: { concurrencies: { type: 'string', default: '1,4,16' }, seconds: { type: 'string', default: '4' } },
  });
  const concurrencies = values.concurrencies.split(',').map(Number);
  const seconds = Number(values.seconds);
  run_.watchdog(2 * concurrencies.length * (seconds + 60) * 1000);
  process.stdout.write(
    `CPU µs per decision by what ran, quota client (batched, one AllowStream) -> service -> one Redis; ${seconds} s per point; ` +
      `node ${process.version}, ${cpus().length} cpus, load average ${loadavg()[0]!.toFixed(2)}\n\n`,
  );
  const header = ['in flight', 'decisions/s', 'p50 ms', 'process', ...CATEGORIES, 'total'];
  process.stdout.write(`| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|\n`);
  for (const concurrency of concurrencies) {
    const dir = await mkdtemp(join(tmpdir(), 'cpu-breakdown-'));
    run_.onCleanup(() => rm(dir, { recursive: true, force: true }));
    const output = await run([
      '--cpu-prof',
      `--cpu-prof-dir=${join(dir, 'caller')}`,
      '--conditions=@quota-service/source',
      '--import',
      'tsx',
      'bench/client-profile.ts',
      ...pointArgs(concurrency, seconds),
      ...['--service-profile', dir],
    ]);
    const figures = /(\d+) decisions\/s, p50 ([0-9.]+) ms/.exec(output);
    const window = /window (\d+)-(\d+) µs, decisions (\d+), redis ([0-9.]+) µs\/decision/.exec(output);
    if (figures === null || window === null) throw new Error(`client-profile printed no figures:\n${output}`);
    const [from, to, decisions] = [Number(window[1]), Number(window[2]), Number(window[3])];
    for (const [name, sub] of [
      ['caller', 'caller'],
      ['service', 'service'],
    ] as const) {
      const times = await mainThreadTimes(join(dir, sub), from, to);
      const per = (category: Category) => (times.get(category) ?? 0) / decisions;
      const busy = CATEGORIES.reduce((sum, c) => sum + per(c), 0);
      const lead = name === 'caller' ? [String(concurrency), figures[1]!, figures[2]!] : ['', '', ''];
      process.stdout.write(`| ${[...lead, name, ...CATEGORIES.map((c) => per(c).toFixed(1)), busy.toFixed(1)].join(' | ')} |\n`);
    }
    process.stdout.write(`| | | | Redis (INFO cpu) | ${CATEGORIES.map(() => '').join(' | ')} | ${Number(window[4]).toFixed(1)} |\n`);
    await rm(dir, { recursive: true, force: true });
  }
  process.stdout.write(`\nidle time is left out; load average after: ${loadavg()[0]!.toFixed(2)}\n`);
  process.stdout.write(
    '\nThe same points without profiles: per decision, each main thread on a CPU, waiting for one (runnable, not running) and ' +
      'how often it slept; for the caller and the service, turns of the event loop and bytes allocated on the JavaScript heap; ' +
      'the mean time of a decision (calls in flight / decisions/s); Redis: time in the decide script per call. ' +
      "Beside each, the same load on the floor of the quota client's path, the two-hop relay of the limiters comparison (a Node " +
      'process between a grpc-js stream and one Redis command per message, no decision): what the same three processes spend ' +
      'when they do nothing but the hops\n\n',
  );
  const schedHeader = [
    'in flight',
    'path',
    'decisions/s',
    'mean ms',
    'process',
    'on a CPU µs',
    'waiting for a CPU µs',
    'sleeps',
    'loop turns',
    'heap bytes allocated',
    'script µs/call (calls/decision)',
  ];
  process.stdout.write(`| ${schedHeader.join(' | ')} |\n|${schedHeader.map(() => '---').join('|')}|\n`);
  for (const concurrency of concurrencies) {
    for (const path of ['quota', 'relay'] as const) {
      const args = [...pointArgs(concurrency, seconds), ...(path === 'relay' ? ['--relay'] : [])];
      const output = await run(['--conditions=@quota-service/source', '--import', 'tsx', 'bench/client-profile.ts', ...args]);
      process.stdout.write(`${schedRows(concurrency, path, output).join('\n')}\n`);
    }
  }
  return 0;
}

const PATHS = { quota: 'quota client', relay: 'two-hop relay' } as const;

function pointArgs(concurrency: number, seconds: number): string[] {
  return ['--concurrency', String(concurrency), '--seconds', String(seconds), '--warmup', '1'];
}

/** The scheduler table's rows of one point, from client-profile's output; `relay`: its middle process is the relay, its script none. */
function schedRows(concurrency: number, path: 'quota' | 'relay', output: string): string[] {
  const figures = /(\d+) decisions\/s, p50/.exec(output);
  const script = /redis script (\S+) µs\/call, (\S+) calls\/decision/.exec(output);
  if (figures === null || script === null) throw new Error(`client-profile printed no figures:\n${output}`);
  const rate = Number(figures[1]);
  return (['caller', 'service', 'redis'] as const).map((name, i) => {
    const sched = new RegExp(`^sched ${name} on-cpu (\\S+) wait (\\S+) sleeps (\\S+)$`, 'm').exec(output);
    const lead =
      i === 0 ? [path === 'quota' ? String(concurrency) : '', PATHS[path], String(rate), ((concurrency / rate) * 1000).toFixed(3)] : ['', '', '', ''];
    const cells = sched === null ? ['n/a', 'n/a', 'n/a'] : [sched[1]!, sched[2]!, sched[3]!];
    const counters = new RegExp(`^counters ${name} loops (\\S+) allocated (\\S+)$`, 'm').exec(output);
    // Redis is not a Node process: no counters.
    const counterCells = name === 'redis' ? ['', ''] : [counters?.[1] ?? 'n/a', counters?.[2] ?? 'n/a'];
    const scriptCell = name === 'redis' && path === 'quota' ? `${script[1]} (${script[2]})` : '';
    return `| ${[...lead, path === 'relay' && name === 'service' ? 'relay' : name, ...cells, ...counterCells, scriptCell].join(' | ')} |`;
  });
}

benchMain(main);
