import { Status } from 'nice-grpc';
import type { Caller } from '../../config/callers.js';
import type { QuotaEngine } from '../../engine/engine.js';
import { type Decision, type DecisionSource as EngineDecisionSource, InvalidArgumentError, quoteCapped } from '@quota-service/core';
import { DecisionSource, type AllowBatchResult, type AllowRequest, type AllowResponse } from '@quota-service/contract';
import type { Logger } from '../../logger.js';
import { batchItemError } from '../../grpc/error-middleware.js';

/** The most requests one batch (AllowBatch, or one message of AllowStream) may carry. */
export const MAX_BATCH_SIZE = 1000;

/** INVALID_ARGUMENT for a batch over MAX_BATCH_SIZE: it is refused whole, nothing decided. */
export function checkBatchSize(requests: readonly AllowRequest[]): void {
  if (requests.length > MAX_BATCH_SIZE) {
    throw new InvalidArgumentError('requests', `at most ${MAX_BATCH_SIZE} per batch, got ${requests.length}`);
  }
}

/**
 * Decides every request of a batch on its own, exactly as Allow would: a bad
 * request fails only its own result. All are started at once, in order, in
 * one synchronous run, so the store sees them in request order and in the
 * same turn (one script call on a single Redis node). `caller`, when given,
 * limits the policies: a request naming another one fails with
 * PERMISSION_DENIED and is not decided (AllowStream; AllowBatch is checked
 * whole by the auth middleware before it gets here).
 */
export function decideEach(
  engine: QuotaEngine,
  requests: readonly AllowRequest[],
  method: string,
  logger: Logger,
  caller?: Caller,
): Promise<AllowBatchResult[]> {
  const allowed = caller?.policies;
  // A policy name that is not valid UTF-8 is not refused here: validation fails it as INVALID_ARGUMENT.
  const refused = allowed === undefined ? undefined : requests.map((request) => !allowed.has(request.policy) && request.policy.isWellFormed());
  // Usually none is refused: the batch goes to the engine as it is.
  const asked = refused?.includes(true) ? requests.filter((_, index) => !refused[index]) : requests;
  return engine.allowEach(asked, toBatchResult, method.endsWith('/AllowStream') ? 'AllowStream' : 'AllowBatch').then((settled) => {
    const results: AllowBatchResult[] = new Array(requests.length);
    let next = 0;
    for (let index = 0; index < requests.length; index++) {
      if (refused?.[index]) {
        results[index] = {
          error: {
            code: Status.PERMISSION_DENIED,
            message: `requests[${index}]: caller "${caller!.name}" may not use policy ${quoteCapped(requests[index]!.policy)}`,
          },
        };
        continue;
      }
      const outcome = settled[next++]!;
      results[index] = outcome.status === 'fulfilled' ? outcome.value : { error: batchItemError(outcome.reason, index, method, logger) };
    }
    return results;
  });
}

const SOURCES: Record<EngineDecisionSource, DecisionSource> = {
  store: DecisionSource.DECISION_SOURCE_STORE,
  fail_open: DecisionSource.DECISION_SOURCE_FAIL_OPEN,
  fail_closed: DecisionSource.DECISION_SOURCE_FAIL_CLOSED,
  local: DecisionSource.DECISION_SOURCE_LOCAL,
};

export function toAllowResponse(decision: Decision): AllowResponse {
  return {
    allowed: decision.allowed,
    retryAfterMs: decision.retryAfterMs,
    deniedBy: decision.deniedBy,
    limits: decision.limits,
    delayMs: decision.delayMs,
    source: SOURCES[decision.source],
    leaseExpiresInMs: decision.leaseExpiresInMs ?? 0,
  };
}

const toBatchResult = (decision: Decision): AllowBatchResult => ({ response: toAllowResponse(decision) });
