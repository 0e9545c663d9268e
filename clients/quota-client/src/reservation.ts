import { ClientError, Status } from 'nice-grpc';
import type { Decision, QuotaReservation as Reservation, QuotaSettlement as Settlement } from '@quota-service/core';
import type { AllowRequest, SettleResponse } from '@quota-service/contract';
import { QuotaInvalidArgumentError, QuotaRequestError, settleError } from './errors.js';
import type { QuotaRpcClient } from './service-definition.js';
import { callWithin } from './unary-call.js';

/** What a reservation needs of its client: the RPC stub, the deadline, and where to say the service is unavailable. */
export interface ReservationContext {
  readonly rpc: QuotaRpcClient;
  readonly deadlineMs: number;
  unavailable(error: unknown): void;
}

/**
 * A reservation made by an Allow with a request_id and cost = the estimate.
 * settle() sends Settle once; a second call answers the first settlement
 * (already_settled) without asking again, unless the first could not reach
 * the service, in which case it asks again.
 */
export class ReservationHandle implements Reservation {
  readonly requestId: string;
  readonly allowed: boolean;
  readonly estimate: number;
  private first: Promise<Settlement> | undefined;

  constructor(
    private readonly context: ReservationContext,
    private readonly request: AllowRequest,
    readonly decision: Decision,
  ) {
    this.requestId = request.requestId;
    this.allowed = decision.allowed;
    this.estimate = request.cost === 0 ? 1 : request.cost;
  }

  async settle(actual: number): Promise<Settlement> {
    if (typeof actual !== 'number' || !Number.isFinite(actual) || actual < 0) {
      throw new QuotaInvalidArgumentError(Status.INVALID_ARGUMENT, `actual_cost: must be a finite number >= 0, got ${String(actual)}`);
    }
    if (this.decision.source !== 'store') {
      // The failure policy decided: the service holds no reservation to settle.
      return { status: 'not_counted', estimate: this.estimate, actualCost: actual, delta: 0, limits: [] };
    }
    if (!this.allowed) {
      throw new QuotaRequestError(Status.FAILED_PRECONDITION, 'request_id: the reservation was denied, so there is nothing to settle');
    }
    const earlier = this.first;
    if (earlier !== undefined) {
      const settled = await earlier.catch(() => undefined);
      if (settled !== undefined && settled.status !== 'unavailable') return { ...settled, status: 'already_settled' };
    }
    const attempt = this.send(actual);
    this.first = attempt;
    return attempt;
  }

  private async send(actual: number): Promise<Settlement> {
    const { rpc, deadlineMs } = this.context;
    const { policy, identity, requestId } = this.request;
    let response: SettleResponse;
    try {
      response = await callWithin(deadlineMs, (signal) => rpc.settle({ policy, identity, requestId, actualCost: actual }, { signal }));
    } catch (error) {
      if (error instanceof ClientError) {
        const typed = settleError(error.code, error.details);
        if (typed !== undefined) throw typed;
      }
      this.context.unavailable(error);
      return { status: 'unavailable', estimate: this.estimate, actualCost: actual, delta: 0, limits: [] };
    }
    return {
      status: response.alreadySettled ? 'already_settled' : 'settled',
      estimate: response.estimate,
      actualCost: response.actualCost,
      delta: response.delta,
      limits: response.limits,
    };
  }
}
