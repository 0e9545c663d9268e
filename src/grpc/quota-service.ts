import type { CallContext } from 'nice-grpc';
import type { LimitDefinition as LimitFileDefinition, Policy } from '@quota-service/core';
import type { QuotaEngine } from '../engine/engine.js';
import type { Logger } from '../logger.js';
import type {
  AllowBatchRequest,
  AllowBatchResponse,
  AllowRequest,
  AllowResponse,
  GetQuotaRequest,
  GetQuotaResponse,
  LimitDefinition,
  ListPoliciesResponse,
} from '@quota-service/contract';
import { allowStreamHandler } from './allow-stream.js';
import type { CallerContext } from './auth-middleware.js';
import { checkBatchSize, decideEach, toAllowResponse } from './decide-each.js';
import type { QuotaServiceHandlers } from './service-definition.js';

export { MAX_BATCH_SIZE } from './decide-each.js';

const ALLOW_BATCH_PATH = '/quota.v1.QuotaService/AllowBatch';
const ALLOW_STREAM_PATH = '/quota.v1.QuotaService/AllowStream';

/**
 * quota.v1.QuotaService: maps proto messages to the engine and back, nothing
 * more. `draining` aborts when the server starts shutting down: open
 * AllowStream streams then answer what they have read and end.
 */
export function quotaService(engine: QuotaEngine, logger: Logger, draining: AbortSignal): QuotaServiceHandlers {
  return {
    // An AllowRequest has exactly the engine's AllowInput fields: passed as it is, not copied.
    allow: (request: AllowRequest): Promise<AllowResponse> => engine.allow(request, toAllowResponse),

    async allowBatch(request: AllowBatchRequest): Promise<AllowBatchResponse> {
      checkBatchSize(request.requests);
      return { results: await decideEach(engine, request.requests, ALLOW_BATCH_PATH, logger) };
    },

    allowStream: allowStreamHandler((requests, caller) => decideEach(engine, requests, ALLOW_STREAM_PATH, logger, caller), draining),

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
