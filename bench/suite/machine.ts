import { execFile } from 'node:child_process';
import { cpus, loadavg, release, totalmem, type as osType } from 'node:os';
import { promisify } from 'node:util';
import { redisServerBinary } from '../../test/support/redis-server.js';
import type { Machine } from '../doc/results.js';

/** What the report says about the machine a step ran on; the load average is taken now, at the step's start. */
export async function describeMachine(note: string): Promise<Machine> {
  const [one, five, fifteen] = loadavg();
  return {
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
    cpus: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${osType()} ${release()}`,
    node: process.version,
    redis: await redisVersion(),
    loadAverage: [round2(one ?? 0), round2(five ?? 0), round2(fifteen ?? 0)],
    note,
  };
}

let version: Promise<string> | undefined;

function redisVersion(): Promise<string> {
  version ??= promisify(execFile)(redisServerBinary(), ['--version']).then(
    ({ stdout }) => /v=(\S+)/.exec(stdout)?.[1] ?? stdout.trim(),
    () => 'unknown',
  );
  return version;
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}
