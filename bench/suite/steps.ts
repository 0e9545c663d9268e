/** What `make bench` and `make bench-quick` run, in order: each bench is its own process. */
export type Profile = 'full' | 'quick';

export interface StepPlan {
  /** The key of its results (bench/doc/results.ts) and of its section in docs/benchmarks.md. */
  id: string;
  /** Under bench/. */
  file: string;
  args: string[];
}

/**
 * The comparisons with plots come first, then (full only) the benches whose
 * tables the report shows as they print them. The quick profile measures the
 * plotted comparisons with fewer concurrencies, one round and shorter points:
 * the same shape in about three minutes, noisier figures.
 */
const PLOTTED: Record<Profile, StepPlan[]> = {
  full: [
    { id: 'limiters', file: 'limiters-run.ts', args: [] },
    { id: 'http-limiters', file: 'http-limiters-run.ts', args: [] },
    { id: 'cluster', file: 'cluster.ts', args: [] },
  ],
  quick: [
    { id: 'limiters', file: 'limiters-run.ts', args: ['--concurrencies', '1,16,64,256', '--rounds', '1', '--seconds', '2', '--warmup', '1'] },
    { id: 'http-limiters', file: 'http-limiters-run.ts', args: ['--concurrencies', '1,8,32,128', '--rounds', '1', '--seconds', '1.5', '--warmup', '1'] },
    { id: 'cluster', file: 'cluster.ts', args: ['--rounds', '1', '--seconds', '2', '--warmup', '1'] },
  ],
};

/** The benches `make bench` ran before the plotted comparisons existed, each with its own defaults. */
const PRINTED: StepPlan[] = [
  { id: 'flexible', file: 'flexible-run.ts', args: [] },
  { id: 'slices', file: 'slices-run.ts', args: [] },
  { id: 'slices-cluster', file: 'slices-run.ts', args: ['--cluster'] },
  { id: 'batch', file: 'batch-run.ts', args: [] },
  { id: 'order-api', file: 'order-api-run.ts', args: [] },
  { id: 'unary', file: 'run.ts', args: [] },
  { id: 'rls', file: 'rls-run.ts', args: [] },
  { id: 'unary-cpu', file: 'unary-cpu.ts', args: [] },
  { id: 'cpu-breakdown', file: 'cpu-breakdown.ts', args: [] },
  { id: 'workers', file: 'workers-run.ts', args: [] },
  { id: 'algorithms', file: 'algorithms.ts', args: [] },
  { id: 'many-keys', file: 'many-keys.ts', args: [] },
  { id: 'hop-floor', file: 'hop-floor.ts', args: [] },
  { id: 'resp-decode', file: 'resp-decode.ts', args: [] },
  { id: 'script-instructions', file: 'script-instructions.ts', args: [] },
  { id: 'sizes', file: 'sizes.ts', args: [] },
];

export function planSteps(profile: Profile, only: readonly string[] | undefined): StepPlan[] {
  const all = profile === 'full' ? [...PLOTTED.full, ...PRINTED] : PLOTTED.quick;
  if (only === undefined) return all;
  const unknown = only.filter((id) => !all.some((s) => s.id === id));
  if (unknown.length > 0) throw new Error(`--only: no step ${unknown.join(', ')} in the ${profile} profile (steps: ${all.map((s) => s.id).join(', ')})`);
  return all.filter((s) => only.includes(s.id));
}

/** How a reader runs this step alone (after `make build`). */
export function stepCommand(step: StepPlan): string {
  return ['npx tsx', `bench/${step.file}`, ...step.args].join(' ');
}
