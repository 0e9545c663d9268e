import { identityKey, identityPartsSegment, requestKey } from './keys.js';
import type { LimitCall, Limit, LimitOutcome, LimitStatus, SourcelessDecision } from './types.js';
import type { ValidRequest } from './validate-request.js';

/** The decision from each limit's outcome: the first rejecting limit denies, else the longest shaping delay applies. */
export function decisionOf(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): SourcelessDecision {
  let denied = -1;
  let delayMs = 0;
  for (let i = 0; i < limits.length; i++) {
    const outcome = outcomes[i];
    if (outcome?.allowed !== true) {
      denied = i;
      break;
    }
    if (outcome.delayMs !== undefined && outcome.delayMs > delayMs) delayMs = outcome.delayMs;
  }
  const allowed = denied === -1;
  return {
    allowed,
    retryAfterMs: allowed ? 0 : (outcomes[denied]?.retryAfterMs ?? 0),
    deniedBy: allowed ? '' : (limits[denied]?.name ?? ''),
    limits: statuses(limits, outcomes),
    delayMs: allowed ? delayMs : 0,
  };
}

/** One store call per limit of the policy: the limit, the key of the request's identity under it, the cost. */
export function limitCalls(limits: readonly Limit[], request: ValidRequest): LimitCall[] {
  const calls: LimitCall[] = new Array(limits.length);
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    const value = request.identityValues[i];
    if (value === undefined) throw new Error(`policy ${request.policy.name}: no identity value for limit ${limit.name}`);
    calls[i] = { limit, identityKey: identityKey(limit.name, limit.keyBy, value), cost: request.cost };
  }
  return calls;
}

/** Every limit's status from its outcome (AllowResponse.limits). */
export function statuses(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): LimitStatus[] {
  // A loop into a sized array, not map with a closure: once per decision.
  const out: LimitStatus[] = new Array(limits.length);
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    const outcome = outcomes[i];
    out[i] = {
      name: limit.name,
      algorithm: limit.algorithm.name,
      limit: limit.algorithm.capacity(limit.params),
      remaining: outcome?.remaining ?? 0,
      resetAfterMs: outcome?.resetAfterMs ?? 0,
    };
  }
  return out;
}

/**
 * With a request id: where its decision is remembered, beside the identity of
 * the limit at `firstIndex` (the first one the store decides: on a cluster, the
 * first slot group's), for the policy and the whole identity it keys by. Undefined without a request id.
 */
export function requestMemo(request: ValidRequest, firstIndex = 0): { key: string; ttlMs: number } | undefined {
  if (request.requestId === '') return undefined;
  const limits = request.policy.limits;
  const limit = limits[firstIndex];
  const value = request.identityValues[firstIndex];
  if (limit === undefined || value === undefined) return undefined;
  const parts = new Map<string, string>();
  for (let i = 0; i < limits.length; i++) parts.set(limits[i]!.keyBy, request.identityValues[i]!);
  const key = requestKey(request.policy.name, limit.keyBy, value, identityPartsSegment(parts), request.requestId);
  return { key, ttlMs: request.policy.requestIdTtlMs };
}
