import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/**
 * CPU time (user + system, ms) of the three parties to a call: the load driver
 * (this process), a server child, and Redis. Sampled around each round, it says
 * where the time of a decision goes and whether the bench measured the server
 * or merely its own client: if the driver burns more CPU per call than the
 * server, the driver is the bottleneck and both kinds look alike.
 */
export interface CpuSample {
  driverMs: number;
  serverMs: number;
  redisMs: number;
}

export async function sampleCpu(serverPid: number | undefined, redis: Redis | undefined): Promise<CpuSample> {
  const own = process.cpuUsage();
  return {
    driverMs: (own.user + own.system) / 1000,
    serverMs: serverPid === undefined ? Number.NaN : processCpuMs(serverPid),
    redisMs: redis === undefined ? 0 : await redisCpuMs(redis),
  };
}

export function cpuBetween(before: CpuSample, after: CpuSample): CpuSample {
  return {
    driverMs: after.driverMs - before.driverMs,
    serverMs: after.serverMs - before.serverMs,
    redisMs: after.redisMs - before.redisMs,
  };
}

/** utime + stime from /proc/<pid>/stat (Linux); NaN elsewhere, and the report says n/a. */
export function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return Number.NaN;
  }
}

/** Redis's own used_cpu_user + used_cpu_sys (INFO cpu), in ms; includes its background threads. */
export async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const read = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return (read('used_cpu_user') + read('used_cpu_sys')) * 1000;
}
