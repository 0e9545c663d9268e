import { InvalidArgumentError } from 'commander';

// Option value parsers for commander: a bad value is reported by commander,
// naming the option, and quotactl exits with status 2.

/** A whole number from 1 to `max`. */
export const wholeNumber =
  (max: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1 || n > max) throw new InvalidArgumentError(`expected a whole number from 1 to ${max}`);
    return n;
  };

/** Any finite number: whether the service accepts it (a negative cost, say) is the service's to say, naming the field. */
export function finiteNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('expected a number');
  return n;
}

const MAX_DURATION_MS = 3_600_000;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000 } as const;

/** "10", "10s", "500ms", "2m" (a bare number is seconds), as ms: from 1 ms to an hour. */
export function duration(value: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(value.trim());
  const ms = match === null ? Number.NaN : Number(match[1]) * UNIT_MS[(match[2] ?? 's') as keyof typeof UNIT_MS];
  if (!(ms >= 1 && ms <= MAX_DURATION_MS)) throw new InvalidArgumentError('expected a duration from 1ms to 60m, e.g. 10s, 500ms, 2m');
  return Math.round(ms);
}
