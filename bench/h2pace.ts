import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { logRows, runTool, withCallFiles } from './h2load.js';
import { percentile } from './stats.js';

/** Where buildH2pace puts the pacer. */
const BINARY = join('.tmp', 'h2pace');
const SOURCE = join('bench', 'tools', 'h2pace.c');
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_UNAVAILABLE = 14;

/**
 * bench/tools/h2pace.c compiled (with nghttp2's library and headers,
 * libnghttp2-dev, which `make h2pace` installs), built when it is missing or
 * its source is newer; undefined when it cannot be built here.
 */
export async function buildH2pace(repoRoot: string): Promise<string | undefined> {
  const binary = join(repoRoot, BINARY);
  const source = join(repoRoot, SOURCE);
  if (existsSync(binary) && statSync(binary).mtimeMs >= statSync(source).mtimeMs) return binary;
  try {
    await promisify(execFile)('cc', ['-O2', '-o', binary, source, '-lnghttp2']);
    return binary;
  } catch {
    return undefined;
  }
}

/**
 * An open loop by h2pace: `rate` unary gRPC calls per second for `seconds` on
 * one HTTP/2 connection (as a proxy keeps one to its rate limit service),
 * each with the framed request `frame`, call i sent at start + i / rate (not
 * in bursts, as h2load's rate mode sends them); p50/p99 in ms of the time
 * from sending a call to its end; `timedOut` the calls answered
 * DEADLINE_EXCEEDED or UNAVAILABLE (past the deadline `headers` gave them),
 * `errors` the others that did not end OK; `lateP99Ms` how late the pacer
 * itself sent (its p99). Run
 * as root, the pacer gets a real-time priority (chrt), so that this busy
 * machine's other processes do not delay its sends: it sleeps between them
 * and takes little CPU. `headers` go on every call (`name: value`).
 */
export async function h2paceOpenLoop(
  binary: string,
  port: number,
  path: string,
  frame: Uint8Array,
  rate: number,
  seconds: number,
  headers: readonly string[] = [],
): Promise<{ p50: number; p99: number; sent: number; errors: number; timedOut: number; lateP99Ms: number }> {
  return withCallFiles(frame, async (body, log) => {
    const args = ['127.0.0.1', String(port), path, body, String(rate), String(seconds), log, ...headers];
    const realtime = process.getuid?.() === 0;
    const output = await runTool(realtime ? 'chrt' : binary, realtime ? ['-f', '50', binary, ...args] : args);
    const summary = /sent=(\d+) done=(\d+) ok=(\d+) late_p99_us=(\d+)/.exec(output);
    if (summary === null) throw new Error(`h2pace printed no summary:\n${output}`);
    // Each line: when the call was due (µs), its grpc-status (-1: none), its latency (µs).
    const calls = (await logRows(log)) as [number, number, number][];
    const durations = calls.map(([, , latency]) => latency / 1000).sort((a, b) => a - b);
    const timedOut = calls.filter(([, status]) => status === GRPC_DEADLINE_EXCEEDED || status === GRPC_UNAVAILABLE).length;
    const [, sent, , ok, late] = summary.map(Number) as [number, number, number, number, number];
    return { p50: percentile(durations, 50), p99: percentile(durations, 99), sent, errors: sent - ok - timedOut, timedOut, lateP99Ms: late / 1000 };
  });
}
