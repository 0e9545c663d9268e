import { Status } from 'nice-grpc';
import type { Caller } from '../../config/callers.js';
import type { QuotaEngine } from '../../engine/engine.js';
import { type Decision, type DecisionSource as EngineDecisionSource, InvalidArgumentError, quoteCapped } from '@quota-service/core';
import { DecisionSource, type AllowBatchResult, type AllowRequest, type AllowResponse, type BatchItemError } from '@quota-service/contract';
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
 * whole by the auth middleware before it gets here). `late`, when given
 * (StaleRequests.checkEach), marks the requests that arrived after their
 * caller gave up: each fails with DEADLINE_EXCEEDED and is not decided,
 * whatever else it asks.
 */
export function decideEach(
  engine: QuotaEngine,
  requests: readonly AllowRequest[],
  method: string,
  logger: Logger,
  caller?: Caller,
  late?: readonly number[],
): Promise<AllowBatchResult[]> {
  const refused = refusedItems(requests, caller, late);
  // Usually none is refused: the batch goes to the engine as it is.
  const asked = refused === undefined ? requests : requests.filter((_, index) => refused[index] === undefined);
  return engine.allowEach(asked, toBatchResult, method.endsWith('/AllowStream') ? 'AllowStream' : 'AllowBatch').then((settled) => {
    const results: AllowBatchResult[] = new Array(requests.length);
    let next = 0;
    for (let index = 0; index < requests.length; index++) {
      const error = refused?.[index];
      if (error !== undefined) {
        results[index] = { error };
        continue;
      }
      const outcome = settled[next++]!;
      results[index] = outcome.status === 'fulfilled' ? outcome.value : { error: batchItemError(outcome.reason, index, method, logger) };
    }
    return results;
  });
}

/** The items answered without a decision (their caller gave up, or may not use their policy), or undefined when there is none. */
function refusedItems(
  requests: readonly AllowRequest[],
  caller: Caller | undefined,
  late: readonly number[] | undefined,
): Array<BatchItemError | undefined> | undefined {
  const allowed = caller?.policies;
  if (allowed === undefined && late === undefined) return undefined;
  let refused: Array<BatchItemError | undefined> | undefined;
  for (let index = 0; index < requests.length; index++) {
    const request = requests[index]!;
    let error: BatchItemError | undefined;
    if (late !== undefined && late[index]! > 0) {
      error = lateError(index, late[index]!, request.deadlineMs);
    } else if (allowed !== undefined && !allowed.has(request.policy) && request.policy.isWellFormed()) {
      // A policy name that is not valid UTF-8 is not refused here: validation fails it as INVALID_ARGUMENT.
      error = { code: Status.PERMISSION_DENIED, message: `requests[${index}]: caller "${caller!.name}" may not use policy ${quoteCapped(request.policy)}` };
    }
    if (error === undefined) continue;
    refused ??= new Array<BatchItemError | undefined>(requests.length);
    refused[index] = error;
  }
  return refused;
}

/** A batch shed whole (the admission bounds are full): each item says so, or, if it came after its caller gave up, that. */
export function shedEach(requests: readonly AllowRequest[], late: readonly number[] | undefined, message: string): AllowBatchResult[] {
  const results = new Array<AllowBatchResult>(requests.length);
  for (let index = 0; index < requests.length; index++) {
    const lateMs = late?.[index] ?? 0;
    results[index] = { error: lateMs > 0 ? lateError(index, lateMs, requests[index]!.deadlineMs) : { code: Status.RESOURCE_EXHAUSTED, message } };
  }
  return results;
}

function lateError(index: number, lateMs: number, deadlineMs: number): BatchItemError {
  return { code: Status.DEADLINE_EXCEEDED, message: `requests[${index}]: ${lateMessage(lateMs, deadlineMs)}` };
}

/** Why a request that came after its caller gave up was not decided (DEADLINE_EXCEEDED). */
export function lateMessage(lateMs: number, deadlineMs: number): string {
  return `arrived ${Math.round(lateMs)} ms later than the quickest request of its connection, too late for its answer to reach its caller in time (deadline_ms ${deadlineMs}): not decided, nothing spent`;
}

const SOURCES: Record<EngineDecisionSource, DecisionSource> = {
  store: DecisionSource.DECISION_SOURCE_STORE,
  fail_open: DecisionSource.DECISION_SOURCE_FAIL_OPEN,
  fail_closed: DecisionSource.DECISION_SOURCE_FAIL_CLOSED,
  local: DecisionSource.DECISION_SOURCE_LOCAL,
  slice: DecisionSource.DECISION_SOURCE_SLICE,
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
