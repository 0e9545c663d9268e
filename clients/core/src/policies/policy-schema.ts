import { z } from 'zod';
import { KEY_SEGMENT_PATTERN } from '../keys.js';
import { type AlgorithmFileName, PARAMETER_CHECKS, PARAMETER_SHAPES, parameterFields, parameterSchema, sameWindow } from './limit-parameters.js';
import { slicesRefusal, slicesSchema, slicesSupported } from './slice-options.js';

export { SLIDING_COUNTER_MAX_LIMIT, SLIDING_LOG_MAX_LIMIT } from './limit-parameters.js';

const keySegment = z.string().regex(KEY_SEGMENT_PATTERN, 'use 1-64 lowercase letters, digits, "_", "." or "-", starting with a letter or digit');

/** A plan's name: the value of the identity part `plan_by` that selects it. */
export const PLAN_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const planName = z.string().regex(PLAN_NAME_PATTERN, 'a plan name is 1-64 letters, digits, "_", "." or "-", starting with a letter or digit');

const limitCommon = {
  /** Names the limit in responses (denied_by) and in its state keys. */
  name: keySegment,
  /** The identity part (AllowRequest.identity key) this limit counts per value of. */
  key_by: keySegment,
  description: z.string().default(''),
  /** The identity part whose value picks a plan (e.g. "plan"); with `plans`. */
  plan_by: keySegment.optional(),
  /** Per plan, the parameters that differ from the limit's own (checked whole, merged onto them). */
  plans: z.record(planName, z.record(z.string(), z.unknown())).optional(),
  /** Off unless given: holders may lease slices of this limit (token bucket, GCRA and fixed window only). */
  slices: slicesSchema.optional(),
};

/** At most this many plans per limit: each is looked up per decision, and listed by ListPolicies. */
export const MAX_PLANS = 64;

/** The algorithms a policy file can name, in the order PARAMETER_SHAPES lists them. */
const ALGORITHM_FILE_NAMES = Object.keys(PARAMETER_SHAPES) as AlgorithmFileName[];

const ALGORITHM_NAMES_MESSAGE = `must be one of ${ALGORITHM_FILE_NAMES.map((name) => `"${name}"`).join(', ')}`;

/**
 * Plans and overrides change a limit's numbers, not its window: a window's
 * state counts the units of its own window length, and counting anew under
 * another length could grant more than either limit allows.
 */
export const WINDOW_IS_THE_LIMITS = "cannot differ from the limit's own window: the identity's state counts in that window (change the limit itself instead)";

/** The fields every limit has that its checks read. */
interface LimitCommonFields {
  name: string;
  key_by: string;
  slices?: unknown;
  plan_by?: string | undefined;
  plans?: Record<string, Record<string, unknown>> | undefined;
}

/** The checks of one algorithm's limit: across its parameters, and its plans merged onto them and checked the same way. */
function limitChecks(algorithm: AlgorithmFileName) {
  const check = PARAMETER_CHECKS[algorithm];
  const whole = parameterSchema(algorithm);
  const fields = parameterFields(algorithm);
  return (limit: LimitCommonFields, ctx: z.RefinementCtx): void => {
    const own = limit as unknown as Record<string, unknown>;
    check?.(own, ctx);
    if (limit.slices !== undefined && !slicesSupported(algorithm)) {
      ctx.addIssue({ code: 'custom', path: ['slices'], message: slicesRefusal(limit.name, algorithm) });
    }
    if ((limit.plan_by === undefined) !== (limit.plans === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [limit.plan_by === undefined ? 'plan_by' : 'plans'],
        message: 'plan_by and plans go together: plan_by names the identity part whose value picks one of plans',
      });
    }
    if (limit.plan_by !== undefined && limit.plan_by === limit.key_by) {
      ctx.addIssue({ code: 'custom', path: ['plan_by'], message: `must be another identity part than key_by ("${limit.key_by}")` });
    }
    const plans = Object.entries(limit.plans ?? {});
    if (plans.length > MAX_PLANS) ctx.addIssue({ code: 'custom', path: ['plans'], message: `at most ${MAX_PLANS} plans per limit` });
    for (const [name, plan] of plans) {
      if (plan.window !== undefined && !sameWindow(plan.window, own.window)) {
        ctx.addIssue({ code: 'custom', path: ['plans', name, 'window'], message: WINDOW_IS_THE_LIMITS });
        continue;
      }
      const parsed = whole.safeParse(mergePlan(own, fields, plan));
      if (parsed.success) continue;
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: ['plans', name, ...issue.path] });
    }
  };
}

/** A plan's parameters: the limit's own, replaced by the ones the plan gives. */
export function mergePlan(limit: Record<string, unknown>, fields: readonly string[], plan: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = {};
  for (const field of fields) if (limit[field] !== undefined) merged[field] = limit[field];
  return Object.assign(merged, plan);
}

const variant = <A extends AlgorithmFileName>(algorithm: A) => ({ ...limitCommon, algorithm: z.literal(algorithm), ...PARAMETER_SHAPES[algorithm] });

/** One algorithm's limit: the common fields, its parameters, and its checks. */
const limitVariant = <A extends AlgorithmFileName>(algorithm: A) => {
  const checks = limitChecks(algorithm);
  return z.strictObject(variant(algorithm)).superRefine((limit, ctx) => checks(limit as unknown as LimitCommonFields, ctx));
};

/** Each algorithm's limit schema, as a union of one member per algorithm (not one of their union). */
type LimitVariant = { [A in AlgorithmFileName]: ReturnType<typeof limitVariant<A>> }[AlgorithmFileName];

export const limitSchema = z.discriminatedUnion('algorithm', ALGORITHM_FILE_NAMES.map(limitVariant) as unknown as [LimitVariant, ...LimitVariant[]], {
  error: (issue) => (issue.code === 'invalid_union' ? ALGORITHM_NAMES_MESSAGE : undefined),
});

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
      // Several limits are decided all-or-nothing (one store step); a
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
