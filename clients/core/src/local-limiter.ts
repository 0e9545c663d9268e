import { MemorySpace } from './algorithms/memory-space.js';
import { systemClock, type Clock } from './clock.js';
import { decideInMemory } from './decide-in-memory.js';
import { decisionOf, limitCalls, requestMemo } from './decision.js';
import type { AllowParams, Decision, PolicySet } from './types.js';
import { validateRequest } from './validate-request.js';

/** How often (in the limiter's clock) expired state is dropped. */
const SWEEP_INTERVAL_MS = 10_000;

export interface LocalLimiterOptions {
  /** The clock the limits run on; the system clock unless a test runs on virtual time. */
  clock?: Clock;
}

/**
 * Policies decided in this process, by the same algorithm models and the same
 * validation, key and all-or-nothing rules as the service's embedded store.
 * Its state is this process's own: with N processes, each grants the whole
 * limit, so give each 1/N of it when they stand in for a shared quota.
 * Bad input throws InvalidArgumentError, an unknown policy PolicyNotFoundError.
 */
export class LocalLimiter {
  private readonly space = new MemorySpace();
  private readonly clock: Clock;
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly policies: PolicySet,
    options: LocalLimiterOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  allow(input: AllowParams): Decision {
    const request = validateRequest(this.policies, {
      policy: input.policy,
      identity: input.identity,
      cost: input.cost ?? 0,
      requestId: input.requestId ?? '',
    });
    const calls = limitCalls(request.limits, request);
    const remembered = requestMemo(request);
    const memo = remembered === undefined ? undefined : { ...remembered, count: calls.length };
    const now = this.clock.now();
    // Expired state goes as time passes (no timer: importing or building a limiter starts nothing).
    if (now - this.sweptAt >= SWEEP_INTERVAL_MS) {
      this.space.sweep(now);
      this.sweptAt = now;
    }
    const decided = decideInMemory(this.space, calls, 'spend', now, memo === undefined ? {} : { memo });
    return { ...decisionOf(request.limits, decided.outcomes), source: 'local' };
  }
}
