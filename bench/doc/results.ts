// The measurements behind docs/benchmarks.md: what `make bench` / `make
// bench-quick` (bench/suite/) write after each bench, and what the report writer
// (bench/doc/write-report.ts) renders, so the report can be rendered again
// without measuring again. Read through these schemas: a file written by an
// older or broken run fails with the field at fault named.
import { z } from 'zod';

export const machineSchema = z.object({
  cpuModel: z.string(),
  cpus: z.number().int().positive(),
  memoryGiB: z.number().positive(),
  os: z.string(),
  node: z.string(),
  redis: z.string(),
  /** 1, 5 and 15 minute load averages when the step started. */
  loadAverage: z.tuple([z.number(), z.number(), z.number()]),
  /** What else ran on the machine, as the person who started the run said (BENCH_NOTE). */
  note: z.string(),
});
export type Machine = z.infer<typeof machineSchema>;

/** One bench of a run: how it was started, on what, when, and what it measured. */
export const stepSchema = z.object({
  id: z.string().min(1),
  /** The command that runs this bench alone, as a reader would type it. */
  command: z.string().min(1),
  /** The make target that ran it. */
  target: z.enum(['make bench', 'make bench-quick']),
  startedAt: z.iso.datetime(),
  seconds: z.number().nonnegative(),
  exitCode: z.number().int(),
  machine: machineSchema,
  /** What the bench left in BENCH_OUT (bench/bench-out.ts), if it writes figures. */
  figures: z.unknown().optional(),
  /** Its stdout: the tables benches that write no figures print. */
  output: z.string(),
  /** The end of its stderr, kept when it failed. */
  errorOutput: z.string().optional(),
});
export type Step = z.infer<typeof stepSchema>;

export const resultsSchema = z.object({
  version: z.literal(1),
  /** Per step id, its latest run. */
  steps: z.record(z.string(), stepSchema),
});
export type Results = z.infer<typeof resultsSchema>;

const finite = z.number().refine(Number.isFinite, 'a finite number');

/** bench/sweep.ts's points, as bench/limiters-run.ts and bench/http-limiters-run.ts write them. */
export const sweepFiguresSchema = z.object({
  kinds: z
    .array(
      z.object({
        id: z.string(),
        label: z.string(),
        /** A panel of its own in the plots (the HTTP bench: the framework). */
        group: z.string().optional(),
        /** The line's name in a plot's legend, when the label says more (the HTTP bench: the limiter). */
        series: z.string().optional(),
      }),
    )
    .min(1),
  /** Versions of the libraries compared, by package name. */
  versions: z.record(z.string(), z.string()).optional(),
  /** bench/limiters-run.ts: the floor of the quota client's two hops at one call in flight, p50 in ms, same run. */
  floor: z.object({ streamHopMs: finite, redisRoundTripMs: finite }).optional(),
  points: z.array(
    z.object({
      kind: z.string(),
      concurrency: z.number().int().positive(),
      round: z.number().int().positive(),
      decisionsPerSecond: finite,
      p50Ms: z.number(),
      p95Ms: z.number(),
      p99Ms: z.number(),
      calls: z.number().int().nonnegative(),
      errors: z.number().int().nonnegative(),
    }),
  ),
});
export type SweepFigures = z.infer<typeof sweepFiguresSchema>;

/** bench/cluster.ts's rounds: a row per store, policy and round, whatever stores and policies it measures. */
export const clusterFiguresSchema = z.object({
  rows: z.array(
    z.object({
      store: z.string(),
      policy: z.string(),
      round: z.number().int().positive(),
      decisionsPerSecond: finite,
      p50Ms: z.number(),
      p95Ms: z.number(),
      p99Ms: z.number(),
      errors: z.number().int().nonnegative(),
      /** CPU per decision in µs: the service process's, and Redis's (every master's). */
      serviceUs: z.number().optional(),
      redisUs: z.number().optional(),
      /** Script calls Redis ran per 100 decisions. */
      callsPer100: z.number().optional(),
    }),
  ),
});
export type ClusterFigures = z.infer<typeof clusterFiguresSchema>;

/** Parses a results file's text; the error names the field at fault. */
export function parseResults(text: string, source: string): Results {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${source}: not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  const parsed = resultsSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${source}: ${issue?.path.join('.') || '(top level)'}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}
