import type { CallContext } from 'nice-grpc';
import type { ReleaseRequest, ReleaseResponse, RenewRequest, RenewResponse } from '@quota-service/contract';
import type { QuotaEngine } from '../../engine/engine.js';
import type { Admission } from '../../grpc/admission.js';
import type { CallerContext } from '../../grpc/auth-middleware.js';

/**
 * Release and Renew of quota.v1.QuotaService: the engine's leases
 * (src/engine/leases.ts) behind the same admission as Allow. Validation
 * (policy, identity, request_id) is the engine's, as for Allow; the caller's
 * permission to use the policy is checked by the auth middleware.
 */
export function leaseHandlers(engine: QuotaEngine, admission: Admission) {
  return {
    async release(request: ReleaseRequest, context: CallContext & CallerContext): Promise<ReleaseResponse> {
      const done = admission.admit(context, 1);
      try {
        return await engine.leases.release(request);
      } finally {
        done();
      }
    },

    async renew(request: RenewRequest, context: CallContext & CallerContext): Promise<RenewResponse> {
      const done = admission.admit(context, 1);
      try {
        return { leaseExpiresInMs: await engine.leases.renew(request) };
      } finally {
        done();
      }
    },
  };
}
