import { parsePolicies } from '../../src/config/policies.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { InvalidArgumentError, PolicyNotFoundError } from '../../src/engine/errors.js';
import { MemoryStore } from '../../src/store/memory.js';
import { Status } from 'nice-grpc';
import { QuotaInvalidArgumentError } from './errors.js';
import type { AllowParams, OnUnavailable, QuotaDecision } from './types.js';

/** Answers when the service cannot: the configured failure policy (spec 7.2). */
export type Fallback = (params: AllowParams) => Promise<QuotaDecision>;

export function createFallback(onUnavailable: OnUnavailable, failClosedRetryAfterMs: number): Fallback {
  const failOpen: Fallback = async () => ({ allowed: true, retryAfterMs: 0, deniedBy: '', limits: [], delayMs: 0, source: 'fail_open' });
  const failClosed: Fallback = async () => ({
    allowed: false,
    retryAfterMs: failClosedRetryAfterMs,
    deniedBy: '',
    limits: [],
    delayMs: 0,
    source: 'fail_closed',
  });
  if (onUnavailable === 'fail_open') return failOpen;
  if (onUnavailable === 'fail_closed') return failClosed;

  const local = onUnavailable.local;
  const policies = typeof local.policies === 'string' ? parsePolicies(local.policies, 'onUnavailable.local.policies') : local.policies;
  // The engine on the embedded store: the same validation, keys and TS models
  // the service runs without Redis, here with per-process state.
  const engine = new QuotaEngine(policies, new MemoryStore(local.clock));
  const otherwise = local.otherwise === 'fail_open' ? failOpen : failClosed;
  return async (params) => {
    try {
      const decision = await engine.allow({
        policy: params.policy,
        identity: params.identity,
        cost: params.cost ?? 0,
        requestId: params.requestId ?? '',
      });
      // delayMs: the engine reports it once shaping limits exist; 0 until then.
      const delayMs = (decision as { delayMs?: number }).delayMs ?? 0;
      return { allowed: decision.allowed, retryAfterMs: decision.retryAfterMs, deniedBy: decision.deniedBy, limits: decision.limits, delayMs, source: 'local' };
    } catch (error) {
      if (error instanceof PolicyNotFoundError) return otherwise(params);
      if (error instanceof InvalidArgumentError) throw new QuotaInvalidArgumentError(Status.INVALID_ARGUMENT, error.message);
      throw error;
    }
  };
}
