import { identityKey, identityPartsSegment, leaseMember, requestKey, settlementMarkKey } from './keys.js';
import { PARAMETER_SOURCE, type LimitCall, type Limit, type LimitOutcome, type LimitStatus, type SourcelessDecision } from './types.js';
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
  const decision: SourcelessDecision = {
    allowed,
    retryAfterMs: allowed ? 0 : (outcomes[denied]?.retryAfterMs ?? 0),
    deniedBy: allowed ? '' : (limits[denied]?.name ?? ''),
    limits: statuses(limits, outcomes),
    delayMs: allowed ? delayMs : 0,
  };
  if (allowed) {
    const lease = leaseExpiresInMs(limits, outcomes);
    if (lease > 0) decision.leaseExpiresInMs = lease;
  }
  const expired = outcomes[firstLeaseLimit(limits)]?.leasesExpired;
  if (expired !== undefined) decision.leasesExpired = expired;
  return decision;
}

/** The index of the first lease limit (concurrency) among `limits`, -1 for none: every lease of a policy is in its set. */
export function firstLeaseLimit(limits: readonly Limit[]): number {
  for (let i = 0; i < limits.length; i++) if (limits[i]!.algorithm.lease !== undefined) return i;
  return -1;
}

/** An allowed request's lease: a lease limit's reset_after_ms is when its lease expires; the soonest of them, 0 for none. */
function leaseExpiresInMs(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): number {
  let soonest = 0;
  for (let i = 0; i < limits.length; i++) {
    if (limits[i]!.algorithm.lease === undefined) continue;
    const at = outcomes[i]?.resetAfterMs ?? 0;
    if (soonest === 0 || at < soonest) soonest = at;
  }
  return soonest;
}

/** One store call per limit of the policy: the limit, the key of the request's identity under it, the cost (and a lease limit's member). */
export function limitCalls(limits: readonly Limit[], request: ValidRequest): LimitCall[] {
  const calls: LimitCall[] = new Array(limits.length);
  let member: string | undefined;
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    const value = request.identityValues[i];
    if (value === undefined) throw new Error(`policy ${request.policy.name}: no identity value for limit ${limit.name}`);
    const call: LimitCall = { limit, identityKey: identityKey(limit.name, limit.keyBy, value), cost: request.cost };
    if (limit.algorithm.lease !== undefined && request.requestId !== '') call.lease = member ??= requestLeaseMember(request);
    calls[i] = call;
  }
  return calls;
}

/** The member of the request's lease in each lease set: its whole identity (every part the policy keys by) and its request id. */
export function requestLeaseMember(request: ValidRequest): string {
  const limits = request.policy.limits;
  const parts = new Map<string, string>();
  for (let i = 0; i < limits.length; i++) parts.set(limits[i]!.keyBy, request.identityValues[i]!);
  return leaseMember(identityPartsSegment(parts), request.requestId);
}

/** Every limit's status from its outcome (AllowResponse.limits). */
export function statuses(limits: readonly Limit[], outcomes: readonly LimitOutcome[]): LimitStatus[] {
  // A loop into a sized array, not map with a closure: once per decision.
  const out: LimitStatus[] = new Array(limits.length);
  for (let i = 0; i < limits.length; i++) {
    const limit = limits[i]!;
    const outcome = outcomes[i];
    const capacity = limit.algorithm.capacity(limit.params);
    const remaining = outcome?.remaining ?? 0;
    out[i] = {
      name: limit.name,
      algorithm: limit.algorithm.name,
      limit: capacity,
      remaining,
      resetAfterMs: outcome?.resetAfterMs ?? 0,
      applied: limit.applied ?? PARAMETER_SOURCE.default,
      plan: limit.plan ?? '',
      // A lease limit's remaining is limit - held (below 0 when a lowered limit left more held).
      leasesHeld: limit.algorithm.lease === undefined || outcome === undefined ? 0 : capacity - remaining,
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
  return requestKeyed(request, firstIndex, requestKey);
}

/** With a request id: the mark of a cross-slot settlement in the slot of the limit at `index` (keys.ts settlementMarkKey), kept as long as a reservation is. */
export function settlementMark(request: ValidRequest, index: number): { key: string; ttlMs: number } | undefined {
  return requestKeyed(request, index, settlementMarkKey);
}

function requestKeyed(request: ValidRequest, index: number, keyOf: typeof requestKey): { key: string; ttlMs: number } | undefined {
  if (request.requestId === '') return undefined;
  const limits = request.policy.limits;
  const limit = limits[index];
  const value = request.identityValues[index];
  if (limit === undefined || value === undefined) return undefined;
  const parts = new Map<string, string>();
  for (let i = 0; i < limits.length; i++) parts.set(limits[i]!.keyBy, request.identityValues[i]!);
  const key = keyOf(request.policy.name, limit.keyBy, value, identityPartsSegment(parts), request.requestId);
  return { key, ttlMs: request.policy.requestIdTtlMs };
}
