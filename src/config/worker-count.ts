import { cpuLimit } from './cpu-limit.js';

/** The settings that decide how many service processes run (src/config/env.ts validated them). */
export interface WorkerSettings {
  readonly QUOTA_WORKERS?: number | undefined;
  readonly QUOTA_REDIS_URL?: string | undefined;
  readonly QUOTA_REDIS_CLUSTER?: readonly string[] | undefined;
}

/**
 * How many service processes share the gRPC port: QUOTA_WORKERS when set; else, with Redis,
 * the CPU limit the process sees (src/config/cpu-limit.ts); else 1, since the embedded store
 * is per process and two processes would each keep their own counts (env.ts refuses an explicit
 * QUOTA_WORKERS above 1 without Redis).
 */
export function workerCount(config: WorkerSettings, cpus: () => number = cpuLimit): number {
  if (config.QUOTA_WORKERS !== undefined) return config.QUOTA_WORKERS;
  const redis = config.QUOTA_REDIS_URL !== undefined || config.QUOTA_REDIS_CLUSTER !== undefined;
  return redis ? cpus() : 1;
}
