import { InvalidArgumentError, LocalLimiter, parsePolicies, PolicyNotFoundError } from '@quota-service/core';
import { Status } from 'nice-grpc';
import { QuotaInvalidArgumentError } from './errors.js';
import type { AllowParams, OnUnavailable, QuotaDecision } from './types.js';

/** Answers when the service cannot: the configured failure policy (fail open, fail closed, or a local limit). */
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
  // The same validation, keys and algorithm models as the service's embedded store, with per-process state.
  const limiter = new LocalLimiter(policies, local.clock === undefined ? {} : { clock: local.clock });
  const otherwise = local.otherwise === 'fail_open' ? failOpen : failClosed;
  return async (params) => {
    try {
      // source 'local': the limiter stamps its own decisions.
      return limiter.allow(params);
    } catch (error) {
      if (error instanceof PolicyNotFoundError) return otherwise(params);
      if (error instanceof InvalidArgumentError) throw new QuotaInvalidArgumentError(Status.INVALID_ARGUMENT, error.message);
      throw error;
    }
  };
}
