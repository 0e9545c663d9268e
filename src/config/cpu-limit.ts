import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** Reads a file as text, or undefined when it is not there (or not readable). */
export type ReadText = (path: string) => string | undefined;

const readText: ReadText = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** Where the CPU quota of this process's cgroup is, under cgroup v2 and under v1 (both mount layouts). */
const CGROUP_V2_CPU_MAX = '/sys/fs/cgroup/cpu.max';
const CGROUP_V1_DIRS = ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct'];

/**
 * The number of CPUs this process may use: its cgroup's CPU quota divided by the period,
 * rounded up (a limit of 1.5 CPUs is 2), read from cgroup v2 (`cpu.max`), else cgroup v1
 * (`cpu.cfs_quota_us` / `cpu.cfs_period_us`); without a quota, or above it, the CPUs the
 * machine gives the process (`os.availableParallelism()`). At least 1.
 */
export function cpuLimit(read: ReadText = readText, cpus: number = availableParallelism()): number {
  const quota = cgroupV2Quota(read) ?? cgroupV1Quota(read);
  return Math.max(1, quota === undefined ? cpus : Math.min(quota, cpus));
}

function cgroupV2Quota(read: ReadText): number | undefined {
  const text = read(CGROUP_V2_CPU_MAX);
  if (text === undefined) return undefined;
  const [quota, period] = text.trim().split(/\s+/);
  return wholeCpus(quota, period);
}

function cgroupV1Quota(read: ReadText): number | undefined {
  for (const dir of CGROUP_V1_DIRS) {
    const quota = read(`${dir}/cpu.cfs_quota_us`);
    const period = read(`${dir}/cpu.cfs_period_us`);
    if (quota !== undefined && period !== undefined) return wholeCpus(quota.trim(), period.trim());
  }
  return undefined;
}

/** quota/period rounded up; undefined for no quota (`max` in v2, -1 in v1) or text that is not a quota. */
function wholeCpus(quota: string | undefined, period: string | undefined): number | undefined {
  if (quota === undefined || period === undefined || !/^\d+$/.test(quota) || !/^\d+$/.test(period)) return undefined;
  const [q, p] = [Number(quota), Number(period)];
  return q > 0 && p > 0 ? Math.ceil(q / p) : undefined;
}
