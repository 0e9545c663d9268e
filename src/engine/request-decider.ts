import {
  type AllowInput,
  decisionOf,
  type Limit,
  type LimitCall,
  limitCalls,
  type LimitOutcome,
  type Policy,
  type PolicySet,
  type SourcelessDecision,
  StoreUnavailableError,
  type ValidRequest,
} from '@quota-service/core';
import { isStaleOverrides, type OverrideView } from '../overrides/override.js';
import { decideOne, type QuotaStore } from '../store/store.js';
import { type Prepared, prepareRequest, STALE_RETRIES } from './prepared.js';
import { requestRecords } from './request-records.js';

/**
 * Requests decided with the limits as they apply to the identity now: on the
 * shared store, decided again (at most STALE_RETRIES times) once the
 * overrides are read again when the store found this replica's view of them
 * stale; on the local limiter (failure mode 'local'), this instance's share
 * of those limits. A new reservation is told to `onReserve`.
 */
export class RequestDecider {
  constructor(
    private readonly store: QuotaStore,
    private readonly overrides: OverrideView | undefined,
    /** The policies in force now (hot reload replaces them). */
    private readonly policies: () => PolicySet,
    private readonly onReserve: ((policy: string, ttlMs: number) => void) | undefined,
  ) {}

  prepare(input: AllowInput): Prepared {
    return prepareRequest(this.policies(), this.store, this.overrides, input);
  }

  /** The decision on the shared store; once more after reading the overrides again when the view was stale. */
  decide(prepared: Prepared): Promise<SourcelessDecision> {
    const { request, limits, calls } = prepared;
    const decided = decideOn(this.store, request, limits, calls, this.reserved(request));
    return this.overrides?.refresh === undefined ? decided : decided.then(undefined, (error: unknown) => this.retryStale(prepared, error, 0));
  }

  /** Reads the overrides of `prepared`'s identity again, then decides it anew. */
  refreshed(prepared: Prepared, error: Error, attempt = 0): Promise<SourcelessDecision> {
    return this.overrides!.refresh!(prepared.calls, prepared.request.identityValues, error).then(() => {
      const again = this.prepare(prepared.input);
      return decideOn(this.store, again.request, again.limits, again.calls, this.reserved(again.request)).then(undefined, (next: unknown) =>
        this.retryStale(again, next, attempt + 1),
      );
    });
  }

  /** The request on the local limiter's `store` with its limits scaled: the failure mode 'local'. */
  onLocalStore(prepared: Prepared, store: QuotaStore, scale: (limit: Limit) => Limit): Promise<SourcelessDecision> {
    // This instance's share of the limits as they apply to the identity (plan, override as last seen).
    const scaled = prepared.limits.map(scale);
    const scaledCalls = limitCalls(scaled, prepared.request);
    return decideOn(store, prepared.request, scaled, scaledCalls);
  }

  private retryStale(prepared: Prepared, error: unknown, attempt: number): Promise<SourcelessDecision> {
    if (!isStaleOverrides(error)) return Promise.reject(error);
    // Still behind after reading them again: the store's overrides keep changing, not a bug.
    if (attempt >= STALE_RETRIES) return Promise.reject(new StoreUnavailableError(error));
    return this.refreshed(prepared, error, attempt);
  }

  /** With a request id on a reservable policy and a listener: what tells it of a new reservation of `request`. */
  private reserved(request: ValidRequest): (() => void) | undefined {
    const onReserve = this.onReserve;
    if (request.requestId === '' || onReserve === undefined || !reservable(request.policy)) return undefined;
    return () => onReserve(request.policy.name, request.policy.requestIdTtlMs);
  }
}

/**
 * The decision on one store, all or nothing; `limits` are the policy's limits
 * as this store applies them (the local limiter's share, or the limits
 * themselves), `calls` their store calls (limitCalls). `onReserved` is told
 * when the store spent (allowed, not a replay of a remembered decision).
 */
function decideOn(
  store: QuotaStore,
  request: ValidRequest,
  limits: readonly Limit[],
  calls: readonly LimitCall[],
  onReserved?: () => void,
): Promise<SourcelessDecision> {
  return decideOne(store, { mode: 'spend', calls, records: requestRecords(request) }).then((decision) => {
    if (onReserved !== undefined && decision.replayed !== true && allAllowed(decision.outcomes)) onReserved();
    return decisionOf(limits, decision.outcomes);
  });
}

function allAllowed(outcomes: readonly LimitOutcome[]): boolean {
  for (const outcome of outcomes) if (!outcome.allowed) return false;
  return true;
}

/**
 * Whether an Allow with a request_id on `policy` is a reservation: some limit
 * counts units, so a Settle can move them. A policy of concurrency limits
 * only acquires leases; settling one of its request ids moves nothing.
 */
export function reservable(policy: Policy): boolean {
  for (const limit of policy.limits) if (limit.algorithm.lease === undefined) return true;
  return false;
}
