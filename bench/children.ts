import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { own } from '../test/support/owned-child.js';
import { compileServers, OUT_DIR } from './compiled.js';
import { type ProcessCounters, parseCounters } from './process-counters.js';

/** A server child started by the bench; see bench/servers/lifecycle.ts for the child's side. */
export interface ServerChild {
  readonly name: string;
  readonly port: number;
  /** For CPU accounting (bench/cpu.ts). */
  readonly pid: number | undefined;
  /** Its event-loop turns and heap allocations so far; undefined from a child that does not answer within 2 s (an older build's), and from then on. */
  counters(): Promise<ProcessCounters | undefined>;
  /** SIGTERM, then SIGKILL if it has not exited within 3 s. */
  stop(): Promise<void>;
}

const COUNTERS_TIMEOUT_MS = 2_000;

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const STARTUP_TIMEOUT_MS = 30_000;

/** How the Dockerfile and `npm start` run the quota service. */
const SERVICE_NODE_FLAGS = ['--max-semi-space-size=32'];

/**
 * Starts `bench/servers/<entry>` in its own Node process, compiled to JavaScript
 * first as production runs it (bench/compiled.ts), and resolves once it has
 * printed its bound port. `builtIn`: the root of another checkout whose
 * servers are compiled already (a revision bench/ab built), run from there.
 */
export async function startServerChild(
  name: string,
  entry: string,
  args: readonly string[],
  options: { cpuProfDir?: string | undefined; builtIn?: string } = {},
): Promise<ServerChild> {
  const root = options.builtIn ?? REPO_ROOT;
  if (options.builtIn === undefined) await compileServers(REPO_ROOT);
  // One directory per server, default file names: they carry pid and thread id.
  const profiling = options.cpuProfDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${join(options.cpuProfDir, name)}`];
  // The quota service with the Node flags its image and npm start give it (Dockerfile).
  const flags = entry === 'quota-server.ts' ? SERVICE_NODE_FLAGS : [];
  const script = join(root, OUT_DIR, 'bench', 'servers', entry.replace(/\.ts$/, '.js'));
  const child = spawn(process.execPath, [...flags, ...profiling, script, ...args], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // Owned: killed if the bench ends any other way. (The children also exit by
  // themselves when their stdin pipe from us closes.)
  const owner = own(child);

  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    // Keep the tail only: it is for error messages, not a log.
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });

  const stop = () => owner.stop(3_000);

  try {
    // The child's stdout, line by line: its port, then its answers to `counters`.
    const lines = createInterface({ input: child.stdout! });
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name}: no port within ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS);
      const onPort = (line: string) => {
        const match = /^port=(\d+)$/.exec(line);
        if (match === null) return;
        clearTimeout(timer);
        lines.off('line', onPort);
        resolve(Number(match[1]));
      };
      lines.on('line', onPort);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited before listening (code ${String(code)}, signal ${String(signal)}):\n${stderr.trim()}`));
      });
    });
    // An unexpected death later on shows up as failed calls; keep its last words for the report.
    let stopping = false;
    child.once('exit', (code, signal) => {
      if (!stopping) process.stderr.write(`${name} exited during the run (code ${String(code)}, signal ${String(signal)}):\n${stderr.trim()}\n`);
    });
    return {
      name,
      port,
      pid: child.pid,
      counters: askingCounters(child, lines),
      stop: async () => {
        stopping = true;
        await stop();
      },
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Asks the child for its counters (a `counters` line on its stdin, answered by
 * one on its stdout: bench/servers/lifecycle.ts). A child that did not answer
 * once (an older build's) is not asked again.
 */
function askingCounters(child: ChildProcess, lines: Interface): () => Promise<ProcessCounters | undefined> {
  let answer: ((line: string) => void) | undefined;
  lines.on('line', (line) => {
    if (line.startsWith('counters ')) answer?.(line);
  });
  let answers = true;
  return () =>
    new Promise((resolve) => {
      if (!answers) return resolve(undefined);
      const timer = setTimeout(() => {
        answers = false;
        resolve(undefined);
      }, COUNTERS_TIMEOUT_MS);
      answer = (line) => {
        clearTimeout(timer);
        resolve(parseCounters(line));
      };
      child.stdin?.write('counters\n');
    });
}
