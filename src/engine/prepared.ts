import { type AllowInput, type Limit, type LimitCall, type PolicySet, type ValidRequest, validateRequestShape } from '@quota-service/core';
import type { OverrideView } from '../overrides/override.js';
import type { QuotaStore } from '../store/store.js';
import { appliedLimits } from './applied-limits.js';

/** How often a decision is made again after the store found this replica's view of the overrides stale. */
export const STALE_RETRIES = 3;

/** A request ready for the store (prepareRequest). */
export interface Prepared {
  input: AllowInput;
  request: ValidRequest;
  /** Its limits with the parameters that apply to the identity (appliedLimits). */
  limits: readonly Limit[];
  calls: LimitCall[];
  /** The part of the store its decision goes to (QuotaStore.parts); undefined on a store of one part. */
  partition: string | undefined;
}

/** A prepared request and its place in a batch (QuotaEngine.allowEach). */
export interface Indexed {
  index: number;
  prepared: Prepared;
}

/**
 * A request, validated, with its store calls (the parameters that apply to
 * its identity) and the part of the store they go to: computed once per
 * request, since the breaker's partition and the spend both follow them.
 */
export function prepareRequest(policies: PolicySet, store: QuotaStore, overrides: OverrideView | undefined, input: AllowInput): Prepared {
  const request = validateRequestShape(policies, input);
  const { limits, calls } = appliedLimits(request, overrides);
  return { input, request, limits, calls, partition: store.parts?.partitionOf(calls) };
}
