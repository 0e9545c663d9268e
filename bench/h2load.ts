import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { percentile } from './stats.js';

/** Whether h2load (nghttp2) is on PATH (make bench installs it: scripts/ensure-tool.sh). */
export function h2loadAvailable(): boolean {
  return spawnSync('h2load', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A message in gRPC's length-prefixed framing, as h2load sends it as a request body. */
export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/**
 * An open loop by h2load: `rate` unary gRPC calls per second for `seconds`
 * on one HTTP/2 connection (as a proxy keeps one to its rate limit service),
 * each with the framed request `frame`; p50/p99 of the time from sending a
 * call to its end, in ms. h2load is written in C: no garbage collector of its
 * own pauses the measurement, as a Node client's does. It reads HTTP, not
 * gRPC statuses: `errors` are calls that failed or timed out on the wire; a
 * gRPC error answer (trailers only, fast) counts as a call here, which is why
 * the closed-loop phase, whose client reads every call's status, counts those.
 * `headers` go on every call (`name: value`). h2load's rate timer ticks at
 * most every 10 ms and sends every call due by then at once: above 100 calls
 * per second they leave in bursts of rate/100, and the later calls of a burst
 * wait behind the earlier ones on any server, a no-op one too.
 */
export async function h2loadOpenLoop(
  port: number,
  path: string,
  frame: Uint8Array,
  rate: number,
  seconds: number,
  headers: readonly string[] = [],
): Promise<{ p50: number; p99: number; sent: number; errors: number }> {
  return withCallFiles(frame, async (body, log) => {
    const total = Math.max(1, Math.round(rate * seconds));
    const args = [
      ...['-n', String(total), '-c', '1', '-m', '256', '--rps', String(rate)],
      ...['-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers', `--log-file=${log}`],
      ...headers.flatMap((header) => ['-H', header]),
      `http://127.0.0.1:${port}${path}`,
    ];
    const output = await runTool('h2load', args);
    const counts = /requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded/.exec(output);
    if (counts === null) throw new Error(`h2load printed no request counts:\n${output}`);
    // Each line: start time (µs since the epoch), HTTP status, duration (µs).
    const durations = (await logRows(log)).map((row) => (row[2] ?? Number.NaN) / 1000).sort((a, b) => a - b);
    return { p50: percentile(durations, 50), p99: percentile(durations, 99), sent: total, errors: Number(counts[1]) - Number(counts[2]) };
  });
}

/**
 * Runs `run` with the request body written to a file (`body`) and a path for
 * the tool's per-call log (`log`), both in a temporary directory removed after.
 */
export async function withCallFiles<T>(frame: Uint8Array, run: (body: string, log: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'h2-calls-'));
  try {
    const body = join(dir, 'request.bin');
    await writeFile(body, frame);
    return await run(body, join(dir, 'calls.log'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A per-call log's lines, each as its tab-separated numbers. */
export async function logRows(log: string): Promise<number[][]> {
  return (await readFile(log, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.split('\t').map(Number));
}

/** Runs a command to its end: its stdout and stderr together, or a rejection with them when it fails. */
export function runTool(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} exited with ${code}:\n${output}`))));
  });
}

/**
 * A closed loop by h2load for `seconds`: `clients` connections with up to
 * `streams` calls in flight on each, each call the framed request `frame`.
 * Counts of succeeded and failed calls and the mean time per call. HTTP level:
 * a gRPC error answer counts as succeeded, so check a call's status once
 * before (bench/workers-run.ts does), or count decisions from the service's
 * metrics.
 */
export async function h2loadClosedLoop(
  url: string,
  frame: Uint8Array,
  load: { clients: number; streams: number; seconds: number; headers?: readonly string[] },
): Promise<{ succeeded: number; failed: number; meanLatencyMs: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'h2load-'));
  try {
    const body = join(dir, 'request.bin');
    await writeFile(body, frame);
    const args = [
      ...['-c', String(load.clients), '-m', String(load.streams), '-D', String(load.seconds)],
      ...['-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers'],
      ...(load.headers ?? []).flatMap((header) => ['-H', header]),
      url,
    ];
    const output = await runTool('h2load', args);
    const counts = /requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed/.exec(output);
    const mean = /time for request:\s+\S+\s+\S+\s+([0-9.]+)(us|ms|s)\s/.exec(output);
    if (counts === null || mean === null) throw new Error(`h2load printed no request counts:\n${output}`);
    const scale = { us: 0.001, ms: 1, s: 1000 }[mean[2] as 'us' | 'ms' | 's'];
    return { succeeded: Number(counts[1]), failed: Number(counts[2]), meanLatencyMs: Number(mean[1]) * scale };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
