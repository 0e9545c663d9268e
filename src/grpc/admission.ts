import { ServerError, Status, type CallContext } from 'nice-grpc';
import type { AdmissionLimits } from '../config/admission-limits.js';
import type { CallerContext } from './auth-middleware.js';

/** The retry hint of a shed call: about the time a full queue takes to drain. */
export const OVERLOAD_RETRY_AFTER_MS = 100;

/** Trailer of a shed call with the retry hint in milliseconds, as AllowResponse.retry_after_ms is. */
export const RETRY_AFTER_TRAILER = 'retry-after-ms';

/**
 * Load shedding in front of the engine. Every Allow, AllowBatch item,
 * AllowStream item and GetQuota takes a place until it is answered; past the
 * process's bound or the caller's own share, the call is refused at once with
 * RESOURCE_EXHAUSTED and a retry hint, and nothing is decided. So an
 * overloaded service answers "not now", never a grant, the queues in front of
 * the store stay bounded, and one caller's flood leaves room for the others.
 */
export class Admission {
  private pending = 0;
  private readonly byCaller = new Map<string, number>();

  constructor(private readonly limits: AdmissionLimits) {}

  /**
   * Takes `count` places for the call's caller, or throws RESOURCE_EXHAUSTED
   * (with the retry trailer set on `context`). Returns the function that gives them back.
   */
  admit(context: CallContext & CallerContext, count: number): () => void {
    const caller = callerOf(context);
    const release = this.take(caller, count);
    if (release !== undefined) return release;
    context.trailer.set(RETRY_AFTER_TRAILER, String(OVERLOAD_RETRY_AFTER_MS));
    throw new ServerError(Status.RESOURCE_EXHAUSTED, overloadMessage(this.whoIsFull(caller, count)));
  }

  /**
   * admit() for the items of one AllowStream batch: the release function, or
   * the message to answer each item with when the places cannot be taken
   * (RESOURCE_EXHAUSTED item by item, and the stream goes on).
   */
  tryAdmit(context: CallContext & CallerContext, count: number): (() => void) | string {
    const caller = callerOf(context);
    return this.take(caller, count) ?? overloadMessage(this.whoIsFull(caller, count));
  }

  private take(caller: string, count: number): (() => void) | undefined {
    const held = this.byCaller.get(caller) ?? 0;
    if (count > 0 && (this.pending + count > this.limits.total || held + count > this.limits.perCaller)) return undefined;
    this.pending += count;
    this.byCaller.set(caller, held + count);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.pending -= count;
      const left = (this.byCaller.get(caller) ?? count) - count;
      if (left <= 0) this.byCaller.delete(caller);
      else this.byCaller.set(caller, left);
    };
  }

  private whoIsFull(caller: string, count: number): string {
    return (this.byCaller.get(caller) ?? 0) + count > this.limits.perCaller ? 'this caller' : 'the service';
  }

  /** Decisions pending now (for tests and metrics). */
  get size(): number {
    return this.pending;
  }
}

/** The message of a shed call or item. */
export function overloadMessage(what: string): string {
  return `overloaded: too many decisions pending for ${what}; retry in ${OVERLOAD_RETRY_AFTER_MS} ms`;
}

/** The authenticated caller's name, else the client's address without its port (one per host, not per connection). */
function callerOf(context: CallContext & CallerContext): string {
  if (context.caller !== undefined) return `caller ${context.caller.name}`;
  const peer = context.peer;
  const port = peer.lastIndexOf(':');
  return `peer ${port === -1 ? peer : peer.slice(0, port)}`;
}
