// The measuring loop the bench drivers share: warm each kind up, then run the
// rounds with the kinds alternating, so a slow spell of a shared, noisy machine
// hurts every kind instead of whichever happened to run during it.
import type { Redis } from 'ioredis';
import type { AllowCaller } from './client.js';
import { cpuBetween, sampleCpu } from './cpu.js';
import { driveLoad } from './load.js';
import type { BenchOptions } from './options.js';
import { formatRoundLine, type Kind, type Round } from './report.js';

/** Calls still in flight this long after a round's end are aborted, so a stuck server cannot hang the bench. */
export const ROUND_GRACE_MS = 5_000;

/** The longest a bench may run: a startup allowance, the warm-ups, and every round with its grace. */
export function benchBudgetMs(options: BenchOptions, kinds: number, startupMs = 60_000): number {
  return startupMs + kinds * options.warmupSeconds * 1000 + options.rounds * kinds * (options.seconds * 1000 + ROUND_GRACE_MS);
}

export async function alternateRounds(plan: {
  kinds: readonly Kind[];
  callers: Partial<Record<Kind, AllowCaller>>;
  options: BenchOptions;
  /** CPU of the server process each kind talks to, and of Redis, around each round; omit for no CPU figures. */
  cpu?: { pidOf(kind: Kind): number | undefined; redis: Redis };
}): Promise<Round[]> {
  const { kinds, callers, options, cpu } = plan;
  const load = (kind: Kind, seconds: number) => {
    const caller = callers[kind];
    if (caller === undefined) throw new Error(`no caller for kind ${kind}`);
    return driveLoad({ call: caller.call, concurrency: options.concurrency, durationMs: seconds * 1000, graceMs: ROUND_GRACE_MS });
  };
  if (options.warmupSeconds > 0) for (const kind of kinds) await load(kind, options.warmupSeconds);

  const rounds: Round[] = [];
  const unmeasured = { driverMs: Number.NaN, serverMs: Number.NaN, redisMs: Number.NaN };
  for (let round = 1; round <= options.rounds; round++) {
    for (const kind of kinds) {
      const before = cpu && (await sampleCpu(cpu.pidOf(kind), cpu.redis));
      const result = await load(kind, options.seconds);
      const after = cpu && (await sampleCpu(cpu.pidOf(kind), cpu.redis));
      const entry: Round = { round, kind, result, cpu: before && after ? cpuBetween(before, after) : unmeasured };
      rounds.push(entry);
      process.stdout.write(`${formatRoundLine(entry)}\n`);
    }
  }
  return rounds;
}
