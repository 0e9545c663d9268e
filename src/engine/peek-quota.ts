import {
  type Limit,
  type LimitCall,
  type LimitStatus,
  type PeekInput,
  type PolicySet,
  StoreUnavailableError,
  statuses,
  validatePeek,
} from '@quota-service/core';
import { isStaleOverrides, type OverrideView } from '../overrides/override.js';
import { decideOne, type QuotaStore } from '../store/store.js';
import { appliedLimits } from './applied-limits.js';
import type { StoreFailurePolicy } from './failure.js';
import { STALE_RETRIES } from './prepared.js';

/**
 * GetQuota: every limit's status now, as the parameters that apply to the
 * identity set it, spending nothing and writing nothing. The budget and
 * breaker of decisions apply: an unreachable store answers UNAVAILABLE within
 * the budget. A stale view of the overrides is read again, at most
 * STALE_RETRIES times.
 */
export async function peekQuota(
  policies: PolicySet,
  store: QuotaStore,
  failure: StoreFailurePolicy,
  overrides: OverrideView | undefined,
  input: PeekInput,
  /** Told of the statuses read, with the limits and calls they are of (metrics). */
  onRead?: (limits: readonly Limit[], calls: readonly LimitCall[], answer: readonly LimitStatus[]) => void,
): Promise<LimitStatus[]> {
  for (let attempt = 0; ; attempt++) {
    const request = validatePeek(policies, input);
    const { limits, calls } = appliedLimits(request, overrides);
    try {
      const read = () => decideOne(store, { mode: 'peek', calls }).then(({ outcomes }) => outcomes);
      const answer = statuses(limits, await failure.withoutFailureMode(read, store.parts?.partitionOf(calls)));
      onRead?.(limits, calls, answer);
      return answer;
    } catch (error) {
      if (!isStaleOverrides(error) || overrides?.refresh === undefined) throw error;
      if (attempt >= STALE_RETRIES) throw new StoreUnavailableError(error);
      await overrides.refresh(calls, request.identityValues, error);
    }
  }
}
