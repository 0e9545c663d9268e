import type { CallContext } from 'nice-grpc';
import type { Policy } from '../config/policies.js';
import type { LimitDefinition as LimitFileDefinition } from '../config/policy-schema.js';
import type { Decision, QuotaEngine } from '../engine/engine.js';
import { InvalidArgumentError } from '../engine/errors.js';
import type { Logger } from '../logger.js';
import type { DecisionSource as EngineDecisionSource } from '../store/failure.js';
import {
  DecisionSource,
  type AllowBatchRequest,
  type AllowBatchResponse,
  type AllowBatchResult,
  type AllowRequest,
  type AllowResponse,
  type GetQuotaRequest,
  type GetQuotaResponse,
  type LimitDefinition,
  type ListPoliciesResponse,
  type QuotaServiceImplementation,
} from '../gen/quota/v1/quota.js';
import type { CallerContext } from './auth-middleware.js';
import { batchItemError } from './error-middleware.js';

/** The most requests one AllowBatch call may carry; a bigger batch is rejected whole. */
export const MAX_BATCH_SIZE = 1000;

const SOURCES: Record<EngineDecisionSource, DecisionSource> = {
  store: DecisionSource.DECISION_SOURCE_STORE,
  fail_open: DecisionSource.DECISION_SOURCE_FAIL_OPEN,
  fail_closed: DecisionSource.DECISION_SOURCE_FAIL_CLOSED,
  local: DecisionSource.DECISION_SOURCE_LOCAL,
};

/** quota.v1.QuotaService: maps proto messages to the engine and back, nothing more. */
export function quotaService(engine: QuotaEngine, logger: Logger): QuotaServiceImplementation {
  return {
    // An AllowRequest has exactly the engine's AllowInput fields: passed as it is, not copied.
    allow: async (request: AllowRequest): Promise<AllowResponse> => toAllowResponse(await engine.allow(request)),

    async allowBatch(request: AllowBatchRequest): Promise<AllowBatchResponse> {
      const items = request.requests;
      if (items.length > MAX_BATCH_SIZE) {
        throw new InvalidArgumentError('requests', `at most ${MAX_BATCH_SIZE} per batch, got ${items.length}`);
      }
      // All started at once, in order, in one synchronous run: the store sees
      // them in request order and in the same turn (ioredis pipelines them), and
      // each is decided on its own.
      const pending: Promise<AllowBatchResult>[] = new Array(items.length);
      for (let index = 0; index < items.length; index++) {
        pending[index] = engine.allow(items[index]!).then(toBatchResult, (error: unknown) => ({ error: batchItemError(error, index, ALLOW_BATCH_PATH, logger) }));
      }
      return { results: await Promise.all(pending) };
    },

    async getQuota(request: GetQuotaRequest): Promise<GetQuotaResponse> {
      return { limits: await engine.getQuota({ policy: request.policy, identity: request.identity }) };
    },

    // An authenticated caller sees the policies it may use, nothing more (least privilege:
    // other callers' policy names and limits are not its business).
    async listPolicies(_request: unknown, context: CallContext & CallerContext): Promise<ListPoliciesResponse> {
      const allowed = context.caller?.policies;
      const policies = engine.listPolicies().filter((policy) => allowed === undefined || allowed.has(policy.name));
      return { policies: policies.map(toProtoPolicy) };
    },
  };
}

const ALLOW_BATCH_PATH = '/quota.v1.QuotaService/AllowBatch';

function toAllowResponse(decision: Decision): AllowResponse {
  return {
    allowed: decision.allowed,
    retryAfterMs: decision.retryAfterMs,
    deniedBy: decision.deniedBy,
    limits: decision.limits,
    delayMs: decision.delayMs,
    source: SOURCES[decision.source],
  };
}

const toBatchResult = (decision: Decision): AllowBatchResult => ({ response: toAllowResponse(decision) });

function toProtoPolicy(policy: Policy) {
  return {
    name: policy.name,
    description: policy.description,
    limits: policy.limits.map((limit) => toProtoLimit(limit.definition)),
    failureMode: { mode: policy.failure.mode, localShare: policy.failure.mode === 'local' ? policy.failure.localShare : 0 },
  };
}

function toProtoLimit(definition: LimitFileDefinition): LimitDefinition {
  const common = { name: definition.name, keyBy: definition.key_by };
  switch (definition.algorithm) {
    case 'token_bucket':
      return { ...common, tokenBucket: { capacity: definition.capacity, refillPerSecond: definition.refill_per_second } };
    case 'fixed_window':
      return { ...common, fixedWindow: { limit: definition.limit, window: definition.window } };
    case 'sliding_window_log':
      return { ...common, slidingWindowLog: { limit: definition.limit, window: definition.window } };
    case 'sliding_window_counter':
      return { ...common, slidingWindowCounter: { limit: definition.limit, window: definition.window } };
    case 'leaky_bucket':
      return { ...common, leakyBucket: { capacity: definition.capacity, leakPerSecond: definition.leak_per_second, mode: definition.mode } };
    case 'gcra':
      return { ...common, gcra: { capacity: definition.capacity, refillPerSecond: definition.refill_per_second } };
  }
}
