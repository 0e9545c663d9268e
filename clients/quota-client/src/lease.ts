import { ClientError, Status } from 'nice-grpc';
import type { Decision, Lease, LeaseRelease } from '@quota-service/core';
import type { AllowRequest } from '@quota-service/contract';
import { LeaseLostError, requestError } from './errors.js';
import type { LeaseTimers } from './lease-timers.js';
import type { QuotaRpcClient } from './service-definition.js';
import type { QuotaClientLogger } from './types.js';
import { callWithin } from './unary-call.js';

/** What a lease needs of its client. */
export interface LeaseContext {
  readonly rpc: QuotaRpcClient;
  readonly deadlineMs: number;
  readonly timers: LeaseTimers;
  readonly logger: QuotaClientLogger | undefined;
}

/**
 * A renewal is sent once a third of the lease's time has passed, so two more
 * attempts fit before it expires when one fails.
 */
const RENEW_AT = 1 / 3;
/** After a failed renewal, the next attempt waits this share of the time left (at least MIN_RETRY_MS). */
const RETRY_AT = 1 / 3;
const MIN_RETRY_MS = 10;

/**
 * A concurrency lease acquired by an Allow with a request_id. While held it
 * renews itself (Renew) well before it expires; it ends with release(),
 * disposal, or loss. Expiry is tracked from the moment each Allow or Renew
 * was sent, so the local estimate never outlives the store's record: when a
 * renewal cannot reach the service before that estimate passes, the lease is
 * lost. A lease the service did not count (denied, or granted by a failure
 * policy without a lease expiry) is never renewed.
 */
export class LeaseHandle implements Lease {
  readonly requestId: string;
  readonly acquired: boolean;
  private readonly controller = new AbortController();
  private state: 'held' | 'released' | 'lost' | 'not_held';
  /** Counted by the service: renew and release it there. */
  private readonly counted: boolean;
  private expiresAt = 0;
  private timer: unknown;
  private releasing: Promise<LeaseRelease> | undefined;

  constructor(
    private readonly context: LeaseContext,
    private readonly request: AllowRequest,
    readonly decision: Decision,
    /** When the Allow was sent, on the lease timers' clock. */
    sentAt: number,
    leaseExpiresInMs: number,
  ) {
    this.requestId = request.requestId;
    this.acquired = decision.allowed;
    // The service says how long a lease it holds lives (its store's, or its local failure mode's); 0: it holds none.
    this.counted = decision.allowed && leaseExpiresInMs > 0;
    this.state = decision.allowed ? 'held' : 'not_held';
    if (this.counted) this.renewed(sentAt, leaseExpiresInMs);
  }

  get held(): boolean {
    return this.state === 'held';
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  release(): Promise<LeaseRelease> {
    this.releasing ??= this.sendRelease();
    return this.releasing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release().then(() => undefined);
  }

  private async sendRelease(): Promise<LeaseRelease> {
    const wasHeld = this.state === 'held';
    const lostToService =
      this.state === 'lost' && this.controller.signal.reason instanceof LeaseLostError && this.controller.signal.reason.reason === 'not_held';
    if (this.state === 'held') this.state = 'released';
    this.stopTimer();
    if (!this.counted) return { status: 'not_counted' };
    if (lostToService) return { status: 'not_held' };
    const { rpc, deadlineMs } = this.context;
    const { policy, identity, requestId } = this.request;
    try {
      const response = await callWithin(deadlineMs, (signal) => rpc.release({ policy, identity, requestId }, { signal }));
      return { status: response.released ? 'released' : 'not_held' };
    } catch (error) {
      if (error instanceof ClientError) {
        const typed = requestError(error.code, error.details);
        if (typed !== undefined) throw typed;
      }
      // The store frees it when its TTL runs out.
      this.context.logger?.warn({ policy, reason: describe(error), held: wasHeld }, 'lease release could not reach the quota service; it expires on its own');
      return { status: 'unavailable' };
    }
  }

  /** The service confirmed the lease at `sentAt` for `expiresInMs` more: schedule the next renewal. */
  private renewed(sentAt: number, expiresInMs: number): void {
    this.expiresAt = sentAt + expiresInMs;
    const renewAt = sentAt + Math.floor(expiresInMs * RENEW_AT);
    this.schedule(renewAt - this.context.timers.now());
  }

  private schedule(ms: number): void {
    this.stopTimer();
    this.timer = this.context.timers.setTimeout(() => void this.renew(), Math.max(0, ms));
  }

  private stopTimer(): void {
    if (this.timer !== undefined) this.context.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async renew(): Promise<void> {
    this.timer = undefined;
    if (this.state !== 'held') return;
    const { rpc, deadlineMs, timers } = this.context;
    const { policy, identity, requestId } = this.request;
    const sentAt = timers.now();
    let expiresInMs: number;
    try {
      expiresInMs = (await callWithin(deadlineMs, (signal) => rpc.renew({ policy, identity, requestId }, { signal }))).leaseExpiresInMs;
    } catch (error) {
      if (this.state !== 'held') return;
      if (error instanceof ClientError && error.code === Status.NOT_FOUND) return this.lose(new LeaseLostError('not_held', policy, requestId));
      if (error instanceof ClientError && requestError(error.code, error.details) !== undefined) {
        return this.lose(new LeaseLostError('refused', policy, requestId, { cause: requestError(error.code, error.details) }));
      }
      const left = this.expiresAt - timers.now();
      if (left <= 0) return this.lose(new LeaseLostError('expired', policy, requestId, { cause: error }));
      this.context.logger?.warn({ policy, reason: describe(error), leftMs: left }, 'lease renewal could not reach the quota service; trying again');
      this.schedule(Math.min(left, Math.max(MIN_RETRY_MS, Math.floor(left * RETRY_AT))));
      return;
    }
    if (this.state !== 'held') return;
    this.renewed(sentAt, expiresInMs);
  }

  private lose(error: LeaseLostError): void {
    this.state = 'lost';
    this.stopTimer();
    this.context.logger?.warn({ policy: error.policy, reason: error.reason }, 'concurrency lease lost');
    this.controller.abort(error);
  }
}

function describe(error: unknown): string {
  if (error instanceof ClientError) return `${Status[error.code]}: ${error.details}`;
  return error instanceof Error ? error.message : String(error);
}
