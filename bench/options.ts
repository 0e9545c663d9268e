import { parseArgs } from 'node:util';

/** What one `bench/run.ts` invocation measures; every knob has a default so `make bench` needs none. */
export interface BenchOptions {
  /** Measured seconds per round and per server kind. */
  seconds: number;
  /** Calls in flight at once (closed loop: a worker sends its next call when the previous one answered). */
  concurrency: number;
  /** Alternating rounds (noop, service) whose medians are reported. */
  rounds: number;
  /** Unmeasured seconds per kind before the first round: JIT, connections, Redis script cache. */
  warmupSeconds: number;
  /** Write V8 CPU profiles of the server children into this directory (node --cpu-prof). */
  cpuProfDir: string | undefined;
}

const USAGE = `usage: npx tsx bench/run.ts [--seconds N] [--concurrency N] [--rounds N] [--warmup N] [--cpu-prof DIR]
  --seconds N      measured seconds per round and kind (default 4, 1..60)
  --concurrency N  unary calls in flight at once (default 48, 1..1024)
  --rounds N       alternating noop/service rounds (default 3, 1..10)
  --warmup N       unmeasured warm-up seconds per kind (default 2, 0..30)
  --cpu-prof DIR   write CPU profiles of both server processes to DIR`;

export function parseOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      seconds: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '48' },
      rounds: { type: 'string', default: '3' },
      warmup: { type: 'string', default: '2' },
      'cpu-prof': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  // Bounds keep a typo from starting an hour-long run or an unbounded number of calls.
  return {
    seconds: bounded('--seconds', values.seconds, 1, 60, false),
    concurrency: bounded('--concurrency', values.concurrency, 1, 1024, true),
    rounds: bounded('--rounds', values.rounds, 1, 10, true),
    warmupSeconds: bounded('--warmup', values.warmup, 0, 30, false),
    cpuProfDir: values['cpu-prof'],
  };
}

function bounded(flag: string, text: string, min: number, max: number, integer: boolean): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < min || value > max || (integer && !Number.isInteger(value))) {
    throw new Error(`${flag} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got "${text}"\n${USAGE}`);
  }
  return value;
}
