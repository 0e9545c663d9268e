import {
  type Clock,
  type Decision,
  type DecisionSource,
  type Limit,
  type Policy,
  type SourcelessDecision,
  StoreUnavailableError,
  systemClock,
} from '@quota-service/core';
import { MemoryStore } from '../store/memory.js';
import type { QuotaStore } from '../store/store.js';

/** Decides a request on `store` with its limits scaled: how the failure mode 'local' decides. */
export type OnLocalStore = (store: QuotaStore, scale: (limit: Limit) => Limit) => Promise<SourcelessDecision>;

/**
 * What a policy's failure mode answers when the shared store could not
 * decide: fail_open allows, fail_closed denies until the next probe of the
 * store, local decides on this instance's own limiter with its share of each
 * limit ('error' never reaches here: the caller hears of the store's trouble).
 */
export class FailureModes {
  /** The local limiter: this instance's own state, for the failure mode 'local'. */
  private readonly localStore: MemoryStore;
  private readonly scaledLimits = new WeakMap<Limit, Limit>();

  constructor(
    /** When the breaker next probes the store: fail_closed's retry_after_ms. */
    private readonly halfOpenAfterMs: number,
    private readonly clock: Clock | undefined,
  ) {
    this.localStore = new MemoryStore(clock);
  }

  async decide(policy: Policy, onLocalStore: OnLocalStore): Promise<Decision> {
    switch (policy.failure.mode) {
      case 'error':
        throw new StoreUnavailableError(new Error('the store could not decide'));
      case 'fail_open':
        return { allowed: true, retryAfterMs: 0, deniedBy: '', limits: [], delayMs: 0, source: 'fail_open' };
      case 'fail_closed':
        // No gRPC error: a denial the caller already knows how to handle. The
        // next probe of the store is the earliest a retry can find it back.
        return { allowed: false, retryAfterMs: this.halfOpenAfterMs, deniedBy: '', limits: [], delayMs: 0, source: 'fail_closed' };
      case 'local': {
        const share = policy.failure.localShare;
        const decision = await onLocalStore(this.localStore, (limit) => this.scaled(limit, share));
        return stamped(decision, 'local');
      }
    }
  }

  /** Keys held by the local limiter (for the state-keys metric). */
  localKeyCount(): number {
    return this.localStore.space.keys((this.clock ?? systemClock).now()).length;
  }

  private scaled(limit: Limit, share: number): Limit {
    let scaled = this.scaledLimits.get(limit);
    if (scaled === undefined) {
      scaled = Object.freeze({ ...limit, params: limit.algorithm.scaleParams(limit.params, share) });
      this.scaledLimits.set(limit, scaled);
    }
    return scaled;
  }

  async close(): Promise<void> {
    await this.localStore.close();
  }
}

/**
 * The decision with its source, built field by field. Not `{ ...decision, source }`:
 * on Node 20 that spread, once per decision, made copies V8 promoted to old space
 * (each then died there, to be reclaimed by a mark-compact) and made the reads of
 * the result slower downstream (metrics, reply mapping).
 */
export function stamped(decision: SourcelessDecision, source: DecisionSource): Decision {
  const out: Decision = {
    allowed: decision.allowed,
    retryAfterMs: decision.retryAfterMs,
    deniedBy: decision.deniedBy,
    limits: decision.limits,
    delayMs: decision.delayMs,
    source,
  };
  if (decision.leaseExpiresInMs !== undefined) out.leaseExpiresInMs = decision.leaseExpiresInMs;
  if (decision.leasesExpired !== undefined) out.leasesExpired = decision.leasesExpired;
  return out;
}
