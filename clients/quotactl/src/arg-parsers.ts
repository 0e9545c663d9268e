import { InvalidArgumentError } from 'commander';
import ms from 'ms';

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

/** A number above 0 (an override's parameter: 0 would mean "as the limit has it"). */
export function positiveNumber(value: string): number {
  const n = finiteNumber(value);
  if (!(n > 0)) throw new InvalidArgumentError('expected a number greater than 0');
  return n;
}

/** A whole number above 0, up to the largest exact integer. */
export const positiveWholeNumber = wholeNumber(Number.MAX_SAFE_INTEGER);

/**
 * A human duration with its unit, as ms: "2h", "90m", "1.5h", "7d", "30s",
 * "2 hours". A bare number is refused: minutes or milliseconds? An override's
 * lifetime is too important to guess.
 */
export function humanDuration(value: string): number {
  const text = value.trim();
  const parsed = /^\d+(\.\d+)?$/.test(text) ? undefined : ms(text as ms.StringValue);
  if (parsed === undefined || !Number.isFinite(parsed) || parsed < 1)
    throw new InvalidArgumentError('expected a duration with its unit, e.g. 2h, 90m, 30s, 7d');
  return Math.round(parsed);
}
