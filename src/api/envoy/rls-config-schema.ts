import {
  bucketCapacity,
  PARAMETER_CHECKS,
  SLICE_ALGORITHMS,
  SLIDING_COUNTER_MAX_LIMIT,
  SLIDING_LOG_MAX_LIMIT,
  type SlicesDefinition,
  slicesSchema,
  slicesSupported,
  UNITS,
  windowLength,
} from '@quota-service/core';
import { z } from 'zod';

/**
 * One file of QUOTA_RLS_CONFIG: envoyproxy/ratelimit's format (domain,
 * nested descriptors with key, value, rate_limit, shadow_mode, quota_mode,
 * detailed_metric, value_to_metric, share_threshold, metadata), so existing
 * files load as they are, plus this service's
 * additions under names envoyproxy/ratelimit does not use: `limit` (any of
 * our algorithms in place of rate_limit), `spend_when_over` (a rule whose
 * hits are spent even over its limit: charges after the response) and, per
 * domain, `failure_mode` and `local_share`. Unknown keys are errors, as they
 * are there.
 */

const UINT32_MAX = 4_294_967_295;
/** Envoy's units, by the name a file gives (any case, as envoyproxy/ratelimit reads them); windows of our algorithms are read as the policy file reads them. */
const unit = z.preprocess((value) => (typeof value === 'string' ? value.toLowerCase() : value), z.enum(UNITS, { error: `must be one of ${UNITS.join(', ')}` }));

const replaces = z.array(z.strictObject({ name: z.string().min(1, 'must not be empty') })).default([]);

/** envoyproxy/ratelimit's rule: N per unit (a fixed window), or unlimited. */
const rateLimit = z
  .strictObject({
    unit: unit.optional(),
    // Unset means 0, as there: nothing is ever allowed (a blocked value).
    requests_per_unit: z.number().int().min(0).max(UINT32_MAX).default(0),
    unlimited: z.boolean().default(false),
    name: z.string().min(1).optional(),
    replaces,
  })
  .superRefine((rule, ctx) => {
    if (rule.unlimited && rule.unit !== undefined) ctx.addIssue({ code: 'custom', path: ['unit'], message: 'must not be given with unlimited: true' });
    if (!rule.unlimited && rule.unit === undefined) ctx.addIssue({ code: 'custom', path: ['unit'], message: `required: one of ${UNITS.join(', ')}` });
  });

const named = { name: z.string().min(1).optional(), replaces };

const acrossFields = (algorithm: 'token_bucket' | 'gcra' | 'leaky_bucket') => (value: object, ctx: z.RefinementCtx) =>
  PARAMETER_CHECKS[algorithm]?.(value as Record<string, unknown>, ctx);
const positive = z.number().positive().max(1e12);

/** Ours, in place of rate_limit: an algorithm with its parameters (docs/policies.md names the same fields). */
const algorithmLimit = z.discriminatedUnion(
  'algorithm',
  [
    // The policy files' checks across the fields: capacity / rate bounded, as the state's expiry is.
    z
      .strictObject({ ...named, algorithm: z.literal('token_bucket'), capacity: bucketCapacity, refill_per_second: positive })
      .superRefine(acrossFields('token_bucket')),
    z
      .strictObject({ ...named, algorithm: z.literal('gcra'), capacity: bucketCapacity, refill_per_second: z.number().positive().max(10_000) })
      .superRefine(acrossFields('gcra')),
    z
      .strictObject({ ...named, algorithm: z.literal('leaky_bucket'), capacity: bucketCapacity, leak_per_second: positive })
      .superRefine(acrossFields('leaky_bucket')),
    z.strictObject({ ...named, algorithm: z.literal('fixed_window'), limit: z.number().int().positive().max(Number.MAX_SAFE_INTEGER), window: windowLength }),
    z.strictObject({
      ...named,
      algorithm: z.literal('sliding_window_log'),
      limit: z.number().int().positive().max(SLIDING_LOG_MAX_LIMIT),
      window: windowLength,
    }),
    z
      .strictObject({
        ...named,
        algorithm: z.literal('sliding_window_counter'),
        limit: z.number().int().positive().max(SLIDING_COUNTER_MAX_LIMIT),
        window: windowLength,
      })
      // The counter computes limit * window_ms * 3 in whole numbers, which must stay below 2^53.
      .refine((l) => l.limit * l.window * 3 < Number.MAX_SAFE_INTEGER, { message: 'limit * window is too large for the counter', path: ['limit'] }),
  ],
  {
    error: (issue) =>
      issue.code === 'invalid_union'
        ? 'algorithm must be one of token_bucket, gcra, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter'
        : undefined,
  },
);

/** A JSON value, as google.protobuf.Struct holds it (a descriptor's metadata). */
export type MetadataValue = null | boolean | number | string | MetadataValue[] | { [key: string]: MetadataValue };

/** Anything YAML can hold that a Struct can carry; a date or binary is refused. */
const metadataValue: z.ZodType<MetadataValue> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(metadataValue), z.record(z.string(), metadataValue)], {
    error: 'must be text, a number, true/false, null, a list or a map',
  }),
);

/** envoyproxy/ratelimit reads an empty list (`descriptors:` with nothing after it) as none. */
const descriptorList = (item: z.ZodType<DescriptorDefinition>) =>
  z
    .array(item)
    .nullable()
    .default([])
    .transform((list) => list ?? []);

export interface DescriptorDefinition {
  key: string;
  value?: string | undefined;
  rate_limit?: z.infer<typeof rateLimit> | undefined;
  limit?: z.infer<typeof algorithmLimit> | undefined;
  shadow_mode: boolean;
  quota_mode: boolean;
  detailed_metric: boolean;
  value_to_metric: boolean;
  share_threshold: boolean;
  metadata?: Record<string, MetadataValue> | undefined;
  spend_when_over: boolean;
  slices?: SlicesDefinition | undefined;
  descriptors: DescriptorDefinition[];
}

const descriptor: z.ZodType<DescriptorDefinition> = z.lazy(() =>
  z
    .strictObject({
      key: z.string().min(1, 'must not be empty'),
      // YAML may read a value such as 50 or true as a number or a boolean: it is text here.
      value: z.preprocess((v) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v), z.string().min(1, 'must not be empty').optional()),
      rate_limit: rateLimit.optional(),
      limit: algorithmLimit.optional(),
      shadow_mode: z.boolean().default(false),
      // Over its limit, the request is OVER_LIMIT only when every quota-mode descriptor of it is over.
      quota_mode: z.boolean().default(false),
      detailed_metric: z.boolean().default(false),
      // The metrics' rule label carries the request's value where the file has a wildcard or no value.
      value_to_metric: z.boolean().default(false),
      // All values a wildcard value matches share one counter.
      share_threshold: z.boolean().default(false),
      // Returned in the response's dynamic metadata when the descriptor passes.
      metadata: z
        .record(z.string(), metadataValue)
        .nullable()
        .optional()
        .transform((m) => (m === null || m === undefined || Object.keys(m).length === 0 ? undefined : m)),
      // Ours: hits spent even when they go over the limit (a charge after the response).
      spend_when_over: z.boolean().default(false),
      // Ours: the service may decide this rule from slices it leases (docs/policies.md, "Slices").
      slices: slicesSchema.optional(),
      descriptors: descriptorList(descriptor),
    })
    .refine((d) => d.rate_limit === undefined || d.limit === undefined, { message: 'give rate_limit or limit, not both', path: ['limit'] })
    .refine((d) => !d.spend_when_over || d.rate_limit !== undefined || d.limit !== undefined, {
      message: 'only meaningful on a descriptor with rate_limit or limit',
      path: ['spend_when_over'],
    })
    .refine((d) => !d.spend_when_over || !d.shadow_mode, { message: 'a shadow rule never spends over its limit', path: ['spend_when_over'] })
    .refine((d) => d.slices === undefined || d.rate_limit !== undefined || (d.limit !== undefined && slicesSupported(d.limit.algorithm)), {
      message: `only on a rule with rate_limit, or with a limit of ${SLICE_ALGORITHMS.join(', ')}`,
      path: ['slices'],
    })
    .refine((d) => !d.share_threshold || d.value?.includes('*') === true, {
      message: 'only meaningful on a descriptor whose value has a * wildcard (value: files/*)',
      path: ['share_threshold'],
    }),
) as z.ZodType<DescriptorDefinition>;

export const FAILURE_MODES = ['error', 'fail_open', 'fail_closed', 'local'] as const;

export const rlsFileSchema = z
  .strictObject({
    domain: z.string().min(1, 'must not be empty'),
    // When the store cannot answer in time: error = gRPC UNAVAILABLE, and Envoy's failure_mode_deny decides.
    failure_mode: z.enum(FAILURE_MODES, { error: `must be one of ${FAILURE_MODES.join(', ')}` }).default('error'),
    local_share: z.number().gt(0, 'must be above 0').lte(1, 'must be at most 1').optional(),
    descriptors: descriptorList(descriptor),
  })
  .superRefine((file, ctx) => {
    if (file.failure_mode === 'local' && file.local_share === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['local_share'],
        message: 'required with failure_mode local: the share of each limit one instance grants on its own',
      });
    }
    if (file.failure_mode !== 'local' && file.local_share !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['local_share'], message: `only meaningful with failure_mode local (this domain is ${file.failure_mode})` });
    }
  });

export type RlsFile = z.infer<typeof rlsFileSchema>;
export type AlgorithmLimitDefinition = z.infer<typeof algorithmLimit>;
