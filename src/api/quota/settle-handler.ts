import type { CallContext } from 'nice-grpc';
import type { SettleRequest, SettleResponse } from '@quota-service/contract';
import type { QuotaEngine } from '../../engine/engine.js';
import type { Settled } from '../../engine/settle.js';
import type { Admission } from '../../grpc/admission.js';
import type { CallerContext } from '../../grpc/auth-middleware.js';

/**
 * QuotaService.Settle: the request to the engine (which validates it and
 * names the bad field), the settlement back as a complete SettleResponse. The
 * auth middleware has checked that the caller may use the policy, as for Allow.
 */
export function settleHandler(engine: QuotaEngine, admission: Admission) {
  return function settle(request: SettleRequest, context: CallContext & CallerContext): Promise<SettleResponse> {
    const release = admission.admit(context, 1);
    return engine
      .settle({ policy: request.policy, identity: request.identity, requestId: request.requestId, actualCost: request.actualCost })
      .then(toSettleResponse)
      .finally(release);
  };
}

function toSettleResponse(settled: Settled): SettleResponse {
  return {
    estimate: settled.estimate,
    actualCost: settled.actualCost,
    delta: settled.delta,
    alreadySettled: settled.alreadySettled,
    limits: settled.limits,
  };
}
