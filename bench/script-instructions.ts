// Redis's own work per decision, counted in instructions rather than timed:
// redis-server runs under valgrind's callgrind, the decide library loaded as the
// service loads it, and receives script calls exactly as the service sends them
// (the runtime-overrides check included, no override set): one decision alone,
// as at one call in flight, and batches of 8 and 64, for a token bucket and a
// fixed window over many users. An instruction count does not move with the
// load of the machine, where times on a shared machine swing several fold within
// minutes: two versions of the decide script compare exactly, one run each.
// Counted: everything Redis executes from reading a script call to writing its
// reply (networking, argument parsing, the Lua call, the commands it runs).
//
//   npx tsx bench/script-instructions.ts [--calls 300]
//
// Needs valgrind (Debian: apt-get install valgrind).
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { identityKey, type Limit, type LimitCall, OVERRIDE_GENERATION_KEY, parsePolicies } from '@quota-service/core';
import { batchArguments } from '../src/store/redis/script/decide-batch.js';
import { decideArguments, decideLibrary } from '../src/store/redis/script/decide-script.js';
import { freePort, redisServerBinary } from '../test/support/redis-server.js';
import { benchMain, type BenchRun } from './bench-main.js';

const USERS = 10_000;
const BATCHES = [1, 8, 64] as const;

const LIMITS = {
  'token bucket': { name: 'bench', key_by: 'user', algorithm: 'token_bucket', capacity: 1_000_000_000, refill_per_second: 1_000_000 },
  'fixed window': { name: 'bench', key_by: 'user', algorithm: 'fixed_window', limit: 1_000_000_000, window: 'day' },
} as const;

function valgrindAvailable(): boolean {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The limit of `kind` as the service builds it from a policy file. */
function limitOf(kind: keyof typeof LIMITS): Limit {
  const limit = parsePolicies(stringify({ policies: { bench: { limits: [LIMITS[kind]] } } })).get('bench')?.limits[0];
  if (limit === undefined) throw new Error(`no ${kind} limit`);
  return limit;
}

/** One script call's FCALL arguments: `batch` decisions of `limit`, users from `first` on. */
function fcallArguments(limit: Limit, batch: number, first: number): string[] {
  const guard = { generation: 0, generationKey: OVERRIDE_GENERATION_KEY, stamp: '', wildcardExpiresAtMs: 0 };
  const calls = Array.from({ length: batch }, (_, i) => {
    const call: LimitCall = { limit, identityKey: identityKey('bench', 'user', `bench-user-${(first + i) % USERS}`), cost: 1, guard };
    return decideArguments([call], 'spend');
  });
  const { keys, args } = batchArguments(calls);
  return [decideLibrary.decide, String(keys.length), ...keys, ...args];
}

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({ options: { calls: { type: 'string', default: '300' } } });
  const calls = Number(values.calls);
  if (!valgrindAvailable()) {
    process.stderr.write('script-instructions: valgrind is not installed (apt-get install valgrind)\n');
    return 1;
  }
  run.watchdog(20 * 60_000);
  const dir = await mkdtemp(join(tmpdir(), 'script-instructions-'));
  run.onCleanup(() => rm(dir, { recursive: true, force: true }));
  const port = await freePort();
  const server = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${join(dir, 'callgrind.out')}`,
      redisServerBinary(),
      '--port',
      String(port),
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: 'ignore' },
  );
  run.onCleanup(() => void server.kill('SIGKILL'));
  await listening(port);
  const redis = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
  run.onCleanup(() => void redis.disconnect());
  await redis.function('LOAD', 'REPLACE', decideLibrary.code);

  /** Instructions Redis ran for `calls` script calls of `batch` decisions, measured alone. */
  async function count(limit: Limit, batch: number): Promise<number> {
    // Every user once first: the keys exist and Lua's code and tables are warm, as in a running service.
    for (let first = 0; first < USERS; first += batch) await redis.call('FCALL', ...fcallArguments(limit, batch, first));
    const sent = Array.from({ length: calls }, (_, i) => fcallArguments(limit, batch, i * batch));
    execFileSync('callgrind_control', ['--instr=on', String(server.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    for (const args of sent) await redis.call('FCALL', ...args);
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['--instr=off', String(server.pid)], { stdio: 'ignore' });
    return readDump(dir);
  }

  process.stdout.write(
    `Redis instructions per script call and per decision (callgrind), ${calls} script calls per row, ${USERS} users, ` +
      'the runtime-overrides check as the service sends it (no override set); redis-server ' +
      `${
        execFileSync(redisServerBinary(), ['--version'])
          .toString()
          .match(/v=(\S+)/)?.[1] ?? '?'
      }\n\n` +
      '| limit | decisions per script call | instructions per script call | instructions per decision |\n|---|---:|---:|---:|\n',
  );
  for (const kind of Object.keys(LIMITS) as (keyof typeof LIMITS)[]) {
    for (const batch of BATCHES) {
      const total = await count(limitOf(kind), batch);
      process.stdout.write(
        `| ${kind} | ${batch} | ${Math.round(total / calls).toLocaleString('en-US')} | ${Math.round(total / calls / batch).toLocaleString('en-US')} |\n`,
      );
    }
  }
  await redis.quit();
  return 0;
}

/** Resolves once something accepts connections on `port` (redis-server starts slowly under valgrind). */
async function listening(port: number): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nothing listens on port ${port} after 60 s`);
}

/** The instructions of the newest dump callgrind wrote into `dir` (its `totals:` line), then removes it. */
async function readDump(dir: string): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const dumps = (await readdir(dir)).filter((name) => /^callgrind\.out\.\d+/.test(name)).sort();
    const newest = dumps.at(-1);
    if (newest !== undefined) {
      const text = await readFile(join(dir, newest), 'utf8');
      const totals = /^totals: (\d+)/m.exec(text) ?? /^summary: (\d+)/m.exec(text);
      if (totals !== null) {
        await Promise.all(dumps.map((name) => rm(join(dir, name))));
        return Number(totals[1]);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('callgrind wrote no dump');
}

benchMain(main);
