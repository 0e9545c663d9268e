import type { Policy } from '../config/policies.js';
import type { LimitDefinition as LimitFileDefinition } from '../config/policy-schema.js';
import type { QuotaEngine } from '../engine/engine.js';
import type {
  AllowRequest,
  AllowResponse,
  GetQuotaRequest,
  GetQuotaResponse,
  LimitDefinition,
  ListPoliciesResponse,
  QuotaServiceImplementation,
} from '../gen/quota/v1/quota.js';

/** quota.v1.QuotaService: maps proto messages to the engine and back, nothing more. */
export function quotaService(engine: QuotaEngine): QuotaServiceImplementation {
  return {
    async allow(request: AllowRequest): Promise<AllowResponse> {
      return engine.allow({
        policy: request.policy,
        identity: request.identity,
        cost: request.cost,
        requestId: request.requestId,
      });
    },

    async getQuota(request: GetQuotaRequest): Promise<GetQuotaResponse> {
      return { limits: await engine.getQuota({ policy: request.policy, identity: request.identity }) };
    },

    async listPolicies(): Promise<ListPoliciesResponse> {
      return { policies: engine.listPolicies().map(toProtoPolicy) };
    },
  };
}

function toProtoPolicy(policy: Policy) {
  return {
    name: policy.name,
    description: policy.description,
    limits: policy.limits.map((limit) => toProtoLimit(limit.definition)),
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
