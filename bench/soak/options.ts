import { z } from 'zod';

/** `make soak` settings, from the environment (README, docs/operations.md#soak). */
const schema = z.object({
  SOAK_MINUTES: z.coerce.number().min(0.5).max(1_440).default(10),
  /** Decisions/s to hold; unset: half the maximum, measured first. */
  SOAK_RATE: z.coerce.number().int().min(1).max(10_000_000).optional(),
  SOAK_SAMPLE_SECONDS: z.coerce.number().min(1).max(60).default(5),
});

export interface SoakOptions {
  loadMs: number;
  rate: number | undefined;
  sampleMs: number;
  /** The first part of the load, left out of the RSS and fd bars: JIT, pools and caches fill up. */
  warmupMs: number;
}

export function soakOptions(env: NodeJS.ProcessEnv): SoakOptions {
  const parsed = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([name, value]) => name.startsWith('SOAK_') && value !== '')));
  if (!parsed.success) {
    throw new Error(`invalid soak settings:\n${parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`).join('\n')}`);
  }
  const loadMs = parsed.data.SOAK_MINUTES * 60_000;
  return { loadMs, rate: parsed.data.SOAK_RATE, sampleMs: parsed.data.SOAK_SAMPLE_SECONDS * 1_000, warmupMs: Math.min(120_000, loadMs * 0.2) };
}
