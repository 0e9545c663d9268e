import { z } from 'zod';
import { LEAKY_MODES } from '../algorithms/leaky-bucket/model.js';
import { tokenBucketTtlMs } from '../algorithms/token-bucket/model.js';
import { parseWindowLength, WINDOW_LENGTH_MESSAGE, windowOfLength } from '../window-length.js';

/**
 * Each algorithm's parameters as the policy file writes them, and the checks
 * across them. One definition serves a limit's default parameters, its plans
 * and the runtime overrides of the admin API, so all three are held to the
 * same rules and give the same messages.
 */

/** A bucket whose idle state outlives a year is a typo, and its TTL would not fit a PEXPIRE. */
const MAX_STATE_TTL_MS = 366 * 24 * 3600 * 1000;

/** Above 10,000/s GCRA's 10 µs slack would exceed a tenth of a unit (../algorithms/gcra/model.ts). */
const GCRA_MAX_RATE = 10_000;

/** The log stores one entry per unit: this bounds the memory and the script time of one identity. */
export const SLIDING_LOG_MAX_LIMIT = 10_000;

/** The counter computes limit * window_ms * 3 in whole numbers, which must stay below 2^53. */
export const SLIDING_COUNTER_MAX_LIMIT = 10_000_000;

/** A lease set keeps one member per lease held: this bounds the memory and the script time of one identity. */
export const CONCURRENCY_MAX_LIMIT = 10_000;

/** Leases live at least this long: a shorter one would expire while its holder's Renew is on its way. */
export const LEASE_TTL_MIN_MS = 100;

/** And at most a day: a crashed holder's lease is held that long. */
export const LEASE_TTL_MAX_MS = 24 * 3600 * 1000;

/**
 * A bucket's capacity: at least 1, so it can grant a request of cost 1, the cost of a
 * request that gives none. A smaller one (5e-324, say) would make every such request
 * fail as a cost that could never be granted, instead of being counted. Whole-number
 * limits are at least 1 already.
 */
export const MIN_CAPACITY = 1;

export const bucketCapacity = z
  .number()
  .min(MIN_CAPACITY, `at least ${MIN_CAPACITY}: a smaller bucket could never grant a request of cost 1 (the cost of a request that gives none)`)
  .max(1e12);

/**
 * A window: a unit's name or a length (`15m`, `90s`, `1h30m`), read by the
 * parser Envoy's rate limit configuration uses (../window-length.ts). Kept as
 * the text it was given (trimmed, lower case): toParams turns it into the
 * models' window.
 */
const windowName = z
  .string({ error: WINDOW_LENGTH_MESSAGE })
  .transform((text) => text.trim().toLowerCase())
  .refine((text) => parseWindowLength(text) !== undefined, WINDOW_LENGTH_MESSAGE);

/** Two windows of the same length (`minute`, `1m` and `60s` are one window). */
export function sameWindow(a: unknown, b: unknown): boolean {
  const length = parseWindowLength(a);
  return length !== undefined && length === parseWindowLength(b);
}

/** Per algorithm: its parameter fields (no refinements, so they can be made partial for plans). */
export const PARAMETER_SHAPES = {
  token_bucket: {
    capacity: bucketCapacity,
    refill_per_second: z.number().positive().max(1e12),
  },
  fixed_window: {
    limit: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
    window: windowName,
  },
  sliding_window_log: {
    limit: z
      .number()
      .int()
      .positive()
      .max(SLIDING_LOG_MAX_LIMIT, `at most ${SLIDING_LOG_MAX_LIMIT}: the log keeps one entry per unit (use sliding_window_counter for more)`),
    window: windowName,
  },
  sliding_window_counter: {
    limit: z.number().int().positive().max(SLIDING_COUNTER_MAX_LIMIT),
    window: windowName,
  },
  leaky_bucket: {
    capacity: bucketCapacity,
    leak_per_second: z.number().positive().max(1e12),
    mode: z.enum(LEAKY_MODES).default('policing'),
  },
  gcra: {
    capacity: bucketCapacity,
    refill_per_second: z.number().positive().max(GCRA_MAX_RATE),
  },
  concurrency: {
    limit: z.number().int().positive().max(CONCURRENCY_MAX_LIMIT, `at most ${CONCURRENCY_MAX_LIMIT}: the store keeps one entry per lease held`),
    lease_ttl_ms: z
      .number()
      .int()
      .min(LEASE_TTL_MIN_MS, `at least ${LEASE_TTL_MIN_MS} ms: a lease must outlive the Renew that keeps it`)
      .max(LEASE_TTL_MAX_MS, `at most ${LEASE_TTL_MAX_MS} ms (a day): a crashed holder's lease is held that long`),
  },
} as const;

export type AlgorithmFileName = keyof typeof PARAMETER_SHAPES;

/** Per algorithm: its parameters as its model takes them, from the policy file's spelling. */
export const PARAMETER_MODELS: Record<AlgorithmFileName, (p: Record<string, unknown>) => unknown> = {
  token_bucket: (p) => ({ capacity: p.capacity, refillPerSecond: p.refill_per_second }),
  gcra: (p) => ({ capacity: p.capacity, refillPerSecond: p.refill_per_second }),
  // A length of exactly a second, minute, hour or day is that named window (its key and alignment).
  fixed_window: (p) => ({ limit: p.limit, window: windowOfLength(parseWindowLength(p.window)!) }),
  sliding_window_log: (p) => ({ limit: p.limit, window: windowOfLength(parseWindowLength(p.window)!) }),
  sliding_window_counter: (p) => ({ limit: p.limit, window: windowOfLength(parseWindowLength(p.window)!) }),
  leaky_bucket: (p) => ({ capacity: p.capacity, leakPerSecond: p.leak_per_second, mode: p.mode }),
  concurrency: (p) => ({ limit: p.limit, leaseTtlMs: p.lease_ttl_ms }),
};

type Check = (params: Record<string, unknown>, ctx: z.RefinementCtx) => void;

const ratioCheck =
  (rateField: string, ratio: (p: Record<string, number>) => number, message: string): Check =>
  (params, ctx) => {
    if (ratio(params as Record<string, number>) > MAX_STATE_TTL_MS / 1000) ctx.addIssue({ code: 'custom', message, path: [rateField] });
  };

/** The checks across one algorithm's fields, run on a whole set of parameters (a default, a plan merged onto it, an override). */
export const PARAMETER_CHECKS: Partial<Record<AlgorithmFileName, Check>> = {
  token_bucket: (params, ctx) => {
    const p = params as { capacity: number; refill_per_second: number };
    if (tokenBucketTtlMs({ capacity: p.capacity, refillPerSecond: p.refill_per_second }) > MAX_STATE_TTL_MS) {
      ctx.addIssue({
        code: 'custom',
        message: 'capacity / refill_per_second is too large: an idle bucket would have to be kept for over a year',
        path: ['refill_per_second'],
      });
    }
  },
  gcra: ratioCheck(
    'refill_per_second',
    (p) => (p.capacity ?? 0) / (p.refill_per_second ?? 1),
    'capacity / refill_per_second is too large: an idle limit would have to be kept for over a year',
  ),
  sliding_window_counter: (params, ctx) => {
    const p = params as { limit: number; window: string };
    const ms = parseWindowLength(p.window);
    if (ms !== undefined && p.limit * ms * 3 >= Number.MAX_SAFE_INTEGER) {
      ctx.addIssue({
        code: 'custom',
        message: 'limit * window is too large for the counter (it counts limit * window_ms * 3 in whole numbers)',
        path: ['limit'],
      });
    }
  },
  leaky_bucket: ratioCheck(
    'leak_per_second',
    (p) => (p.capacity ?? 0) / (p.leak_per_second ?? 1),
    'capacity / leak_per_second is too large: a full bucket would take over a year to drain',
  ),
};

/** One algorithm's whole parameters, checked: what a limit's default, a merged plan or an override must pass. */
export function parameterSchema(algorithm: AlgorithmFileName) {
  const check = PARAMETER_CHECKS[algorithm];
  const schema = z.strictObject(PARAMETER_SHAPES[algorithm]);
  return check === undefined ? schema : schema.superRefine(check as (value: unknown, ctx: z.RefinementCtx) => void);
}

/** The parameter fields of an algorithm, in the policy file's spelling. */
export function parameterFields(algorithm: AlgorithmFileName): string[] {
  return Object.keys(PARAMETER_SHAPES[algorithm]);
}
