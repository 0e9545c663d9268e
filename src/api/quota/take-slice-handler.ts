import type { CallContext } from 'nice-grpc';
import type { TakeSliceRequest, TakeSliceResponse } from '@quota-service/contract';
import type { QuotaEngine } from '../../engine/engine.js';
import type { Admission } from '../../grpc/admission.js';
import type { CallerContext } from '../../grpc/auth-middleware.js';

/**
 * QuotaService.TakeSlice: the request to the engine (which validates it and
 * names the bad field), the slice back. The auth middleware has checked that
 * the caller may use the policy, as for Allow.
 */
export function takeSliceHandler(engine: QuotaEngine, admission: Admission) {
  return function takeSlice(request: TakeSliceRequest, context: CallContext & CallerContext): Promise<TakeSliceResponse> {
    const release = admission.admit(context, 1);
    return engine
      .takeSlice({
        policy: request.policy,
        identity: request.identity,
        limit: request.limit,
        holder: request.holder,
        giveBack: request.giveBack,
        giveBackOnly: request.giveBackOnly,
      })
      .then((slice) => ({ taken: slice.taken, validMs: slice.validMs, remaining: slice.remaining, returned: slice.returned }))
      .finally(release);
  };
}
