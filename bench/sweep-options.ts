import { parseArgs } from 'node:util';

/** What one sweep bench (bench/limiters-run.ts, bench/http-limiters-run.ts) measures. */
export interface SweepOptions {
  concurrencies: number[];
  rounds: number;
  seconds: number;
  warmupSeconds: number;
}

/** Parses `--concurrencies 1,8,64 --rounds N --seconds N --warmup N`, with the bench's own defaults. */
export function parseSweepOptions(argv: readonly string[], defaults: SweepOptions, usage: string): SweepOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      concurrencies: { type: 'string', default: defaults.concurrencies.join(',') },
      rounds: { type: 'string', default: String(defaults.rounds) },
      seconds: { type: 'string', default: String(defaults.seconds) },
      warmup: { type: 'string', default: String(defaults.warmupSeconds) },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const fail = (flag: string, rule: string, text: string): never => {
    throw new Error(`${flag} must be ${rule}, got "${text}"\n${usage}`);
  };
  const whole = (flag: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    return Number.isInteger(n) && n >= min && n <= max ? n : fail(flag, `a whole number from ${min} to ${max}`, text);
  };
  const concurrencies = values.concurrencies.split(',').map((part) => whole('--concurrencies', part.trim(), 1, 4096));
  if (new Set(concurrencies).size !== concurrencies.length) fail('--concurrencies', 'distinct numbers', values.concurrencies);
  const seconds = Number(values.seconds);
  if (!(seconds >= 0.5 && seconds <= 60)) fail('--seconds', 'a number from 0.5 to 60', values.seconds);
  const warmupSeconds = Number(values.warmup);
  if (!(warmupSeconds >= 0 && warmupSeconds <= 30)) fail('--warmup', 'a number from 0 to 30', values.warmup);
  return {
    concurrencies: concurrencies.sort((a, b) => a - b),
    rounds: whole('--rounds', values.rounds, 1, 10),
    seconds,
    warmupSeconds,
  };
}
