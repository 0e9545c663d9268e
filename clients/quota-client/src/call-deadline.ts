/** The signal one Allow call is sent with: its deadline, and the caller's own signal if any. */
export interface CallDeadline {
  readonly signal: AbortSignal;
  /** True once the deadline (not the caller's signal) aborted the call. */
  readonly expired: boolean;
  /** The call is over: stop the timer and stop listening to the caller's signal. */
  release(): void;
}

/**
 * What a call that ran out of time rejects with inside the client: the
 * DOMException "TimeoutError" AbortSignal.timeout aborts with. The client
 * catches it and lets the failure policy answer; callers never see it.
 */
export class DeadlineExceeded extends DOMException {
  constructor() {
    super('The operation was aborted due to timeout', 'TimeoutError');
  }
}

/** `ms` checked as AbortSignal.timeout checks it: an integer from 0 to 2^32 - 1. */
export function checkDeadlineMs(ms: number): void {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > 0xffff_ffff) {
    throw new RangeError(`The value of "delay" is out of range. It must be an integer >= 0 && <= 4294967295. Received ${String(ms)}`);
  }
}

/**
 * What `AbortSignal.any([AbortSignal.timeout(ms), callerSignal])` gives, for a
 * fraction of its cost: one AbortController, one unref'd timer and at most one
 * listener, all dropped by release(). On Node 20 AbortSignal.timeout and
 * AbortSignal.any register weak references and finalizers per call, costly
 * per decision in CPU and garbage collection.
 *
 * Only the unbatched path (`batch: false`) needs a signal per call, because
 * nice-grpc cancels an RPC through one; the batcher keeps its deadlines
 * without any (batcher.ts).
 *
 * Same behaviour: the deadline aborts with DeadlineExceeded, the caller's
 * signal with its own reason (at once when it is already aborted), whichever
 * comes first.
 */
export function callDeadline(ms: number, callerSignal: AbortSignal | undefined): CallDeadline {
  checkDeadlineMs(ms);
  const controller = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    controller.abort(new DeadlineExceeded());
  }, ms);
  // As AbortSignal.timeout's: a pending deadline does not keep the process alive.
  timer.unref();
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) controller.abort(callerSignal.reason);
  else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    release() {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    },
  };
}
