import { checkCost, identityKey, type Limit, type LimitCall, requestLeaseMember, type ValidRequest } from '@quota-service/core';
import { type OverrideRecord, type OverrideView, overriddenLimit } from '../overrides/override.js';

/** A request's limits with the parameters that apply to its identity, and their store calls. */
export interface AppliedLimits {
  /** Per limit of the policy: an override's parameters, else its plan's, else its own (request.limits). */
  limits: readonly Limit[];
  calls: LimitCall[];
}

/**
 * The parameters each limit applies to the request's identity, by
 * precedence: an exact override of the identity value, else the override
 * with the longest prefix of it, else the identity's plan, else the limit's
 * own (plans are already in request.limits). An override of another
 * algorithm than the limit's (the policy file changed since it was set) is
 * passed over. With a Redis view every call carries the guard its script
 * checks that view with. A cost the limit as applied can never grant is bad
 * input (request comes from validateRequestShape: an override may allow a
 * cost the policy's own limit could not).
 */
export function appliedLimits(request: ValidRequest, view: OverrideView | undefined): AppliedLimits {
  const planned = request.limits;
  const calls: LimitCall[] = new Array(planned.length);
  let limits: Limit[] | undefined;
  let member: string | undefined;
  for (let i = 0; i < planned.length; i++) {
    let limit = planned[i]!;
    const value = request.identityValues[i];
    if (value === undefined) throw new Error(`policy ${request.policy.name}: no identity value for limit ${limit.name}`);
    const key = identityKey(limit.name, limit.keyBy, value);
    if (view === undefined) {
      if (request.cost > 0) checkCost(request.policy, limit, request.cost);
      const call: LimitCall = { limit, identityKey: key, cost: request.cost };
      if (limit.algorithm.lease !== undefined && request.requestId !== '') call.lease = member ??= requestLeaseMember(request);
      calls[i] = call;
      continue;
    }
    const exact = view.exact(limit.name, value);
    const algorithm = limit.algorithm.name;
    const prefix: OverrideRecord | undefined = exact !== undefined && exact.algorithm === algorithm ? undefined : view.prefix(limit.name, algorithm, value);
    const chosen = prefix ?? (exact !== undefined && exact.algorithm === algorithm ? exact : undefined);
    if (chosen !== undefined) {
      limit = overriddenLimit(limit, chosen);
      limits ??= planned.slice();
      limits[i] = limit;
    }
    if (request.cost > 0) checkCost(request.policy, limit, request.cost);
    const call: LimitCall = { limit, identityKey: key, cost: request.cost };
    if (view.guard !== undefined) call.guard = view.guard(key, exact, prefix);
    // A concurrency limit's lease: its member names the whole identity and the request id.
    if (limit.algorithm.lease !== undefined && request.requestId !== '') call.lease = member ??= requestLeaseMember(request);
    calls[i] = call;
  }
  return { limits: limits ?? planned, calls };
}
