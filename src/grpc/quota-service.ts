import type { Policy } from '../config/policies.js';
import type { LimitDefinition as LimitFileDefinition } from '../config/policy-schema.js';
import type { QuotaEngine } from '../engine/engine.js';
import type { DecisionSource as EngineDecisionSource } from '../store/failure.js';
import {
  DecisionSource,
  type AllowRequest,
  type AllowResponse,
  type LimitDefinition,
  type ListPoliciesResponse,
  type QuotaServiceImplementation,
} from '../gen/quota/v1/quota.js';

const SOURCES: Record<EngineDecisionSource, DecisionSource> = {
  store: DecisionSource.DECISION_SOURCE_STORE,
  fail_open: DecisionSource.DECISION_SOURCE_FAIL_OPEN,
  fail_closed: DecisionSource.DECISION_SOURCE_FAIL_CLOSED,
  local: DecisionSource.DECISION_SOURCE_LOCAL,
};

/** quota.v1.QuotaService: maps proto messages to the engine and back, nothing more. */
export function quotaService(engine: QuotaEngine): QuotaServiceImplementation {
  return {
    async allow(request: AllowRequest): Promise<AllowResponse> {
      const decision = await engine.allow({
        policy: request.policy,
        identity: request.identity,
        cost: request.cost,
        requestId: request.requestId,
      });
      return { ...decision, source: SOURCES[decision.source] };
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
  }
}
