import { z } from 'zod';
import { WINDOWS } from '../algorithms/fixed-window/model.js';
import { LEAKY_MODES } from '../algorithms/leaky-bucket/model.js';
import { tokenBucketTtlMs } from '../algorithms/token-bucket/model.js';
import { KEY_SEGMENT_PATTERN } from '../keys.js';

/** A bucket whose idle state outlives a year is a typo, and its TTL would not fit a PEXPIRE. */
const MAX_STATE_TTL_MS = 366 * 24 * 3600 * 1000;

const keySegment = z.string().regex(KEY_SEGMENT_PATTERN, 'use 1-64 lowercase letters, digits, "_", "." or "-", starting with a letter or digit');

const limitCommon = {
  /** Names the limit in responses (denied_by) and in its state keys. */
  name: keySegment,
  /** The identity part (AllowRequest.identity key) this limit counts per value of. */
  key_by: keySegment,
  description: z.string().default(''),
};

const tokenBucketLimit = z
  .strictObject({
    ...limitCommon,
    algorithm: z.literal('token_bucket'),
    capacity: z.number().positive().max(1e12),
    refill_per_second: z.number().positive().max(1e12),
  })
  .refine((l) => tokenBucketTtlMs({ capacity: l.capacity, refillPerSecond: l.refill_per_second }) <= MAX_STATE_TTL_MS, {
    message: 'capacity / refill_per_second is too large: an idle bucket would have to be kept for over a year',
    path: ['refill_per_second'],
  });

/** Above 10,000/s GCRA's 10 µs slack would exceed a tenth of a unit (../algorithms/gcra/model.ts). */
const GCRA_MAX_RATE = 10_000;

const gcraLimit = z
  .strictObject({
    ...limitCommon,
    algorithm: z.literal('gcra'),
    capacity: z.number().positive().max(1e12),
    refill_per_second: z.number().positive().max(GCRA_MAX_RATE),
  })
  .refine((l) => l.capacity / l.refill_per_second <= MAX_STATE_TTL_MS / 1000, {
    message: 'capacity / refill_per_second is too large: an idle limit would have to be kept for over a year',
    path: ['refill_per_second'],
  });

const windowName = z.enum(Object.keys(WINDOWS) as [keyof typeof WINDOWS, ...(keyof typeof WINDOWS)[]]);

const fixedWindowLimit = z.strictObject({
  ...limitCommon,
  algorithm: z.literal('fixed_window'),
  limit: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  window: windowName,
});

/** The log stores one entry per unit: this bounds the memory and the script time of one identity. */
export const SLIDING_LOG_MAX_LIMIT = 10_000;

const slidingWindowLogLimit = z.strictObject({
  ...limitCommon,
  algorithm: z.literal('sliding_window_log'),
  limit: z
    .number()
    .int()
    .positive()
    .max(SLIDING_LOG_MAX_LIMIT, `at most ${SLIDING_LOG_MAX_LIMIT}: the log keeps one entry per unit (use sliding_window_counter for more)`),
  window: windowName,
});

/** The counter computes limit * window_ms * 3 in whole numbers, which must stay below 2^53. */
export const SLIDING_COUNTER_MAX_LIMIT = 10_000_000;

const slidingWindowCounterLimit = z.strictObject({
  ...limitCommon,
  algorithm: z.literal('sliding_window_counter'),
  limit: z.number().int().positive().max(SLIDING_COUNTER_MAX_LIMIT),
  window: windowName,
});

const leakyBucketLimit = z
  .strictObject({
    ...limitCommon,
    algorithm: z.literal('leaky_bucket'),
    capacity: z.number().positive().max(1e12),
    leak_per_second: z.number().positive().max(1e12),
    mode: z.enum(LEAKY_MODES).default('policing'),
  })
  .refine((l) => l.capacity / l.leak_per_second <= MAX_STATE_TTL_MS / 1000, {
    message: 'capacity / leak_per_second is too large: a full bucket would take over a year to drain',
    path: ['leak_per_second'],
  });

const ALGORITHM_NAMES_MESSAGE = 'must be one of "token_bucket", "fixed_window", "sliding_window_log", "sliding_window_counter", "leaky_bucket", "gcra"';

export const limitSchema = z.discriminatedUnion(
  'algorithm',
  [tokenBucketLimit, fixedWindowLimit, slidingWindowLogLimit, slidingWindowCounterLimit, leakyBucketLimit, gcraLimit],
  {
    error: (issue) => (issue.code === 'invalid_union' ? ALGORITHM_NAMES_MESSAGE : undefined),
  },
);

/** What a policy does when the store cannot be asked in time. */
export const FAILURE_MODES = ['fail_open', 'fail_closed', 'local'] as const;
export type FailureModeName = (typeof FAILURE_MODES)[number];

const policySchema = z
  .strictObject({
    description: z.string().default(''),
    // fail_open by default: the limiter is one control among several and
    // must not turn a store outage into an outage of every endpoint; policies that
    // guard costly or strictly metered work say fail_closed or local.
    failure_mode: z.enum(FAILURE_MODES, { error: 'must be one of "fail_open", "fail_closed", "local"' }).default('fail_open'),
    /** For failure_mode local: the share of each limit one instance grants on its own. */
    local_share: z.number().gt(0, 'must be above 0').lte(1, 'must be at most 1').optional(),
    /**
     * Idempotent Allow: how long a decision made with a request_id is remembered;
     * a retry with the same id within it gets that decision again and spends nothing.
     */
    request_id_ttl_ms: z.number().int().min(1_000).max(86_400_000).default(60_000),
    limits: z
      .array(limitSchema)
      .min(1, 'a policy needs at least one limit')
      // Several limits are decided all-or-nothing (src/engine/slot-groups.ts); a
      // request carries one key per limit, and a script call one group of them.
      .max(16, 'at most 16 limits per policy'),
  })
  .superRefine((policy, ctx) => {
    if (policy.failure_mode === 'local' && policy.local_share === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['local_share'],
        message: 'required with failure_mode local: the share of each limit one instance grants on its own, e.g. 0.25 for 4 replicas',
      });
    }
    if (policy.failure_mode !== 'local' && policy.local_share !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['local_share'], message: `only meaningful with failure_mode local (this policy is ${policy.failure_mode})` });
    }
  });

export const policyFileSchema = z.strictObject({ policies: z.record(keySegment, policySchema) }).superRefine((file, ctx) => {
  // Limits that share a name share state keys, so they must be the same limit.
  const seen = new Map<string, { policy: string; json: string }>();
  for (const [policyName, policy] of Object.entries(file.policies)) {
    policy.limits.forEach((limit, index) => {
      const json = JSON.stringify({ ...limit, description: '' });
      const first = seen.get(limit.name);
      if (first === undefined) seen.set(limit.name, { policy: policyName, json });
      else if (first.json !== json) {
        ctx.addIssue({
          code: 'custom',
          path: ['policies', policyName, 'limits', index, 'name'],
          message: `limit "${limit.name}" is also defined in policy "${first.policy}" with other settings; limits that share a name share state, so give this one another name`,
        });
      }
    });
  }
});

export type PolicyFile = z.infer<typeof policyFileSchema>;
export type LimitDefinition = z.infer<typeof limitSchema>;
