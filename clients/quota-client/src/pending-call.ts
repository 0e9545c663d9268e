import type { AllowRequest, AllowResponse } from '@quota-service/contract';
import { DeadlineExceeded } from './call-deadline.js';

/**
 * One call waiting for its answer: plain data, a timer and module-level
 * functions (finish, giveUp, expire) instead of an AbortController, an abort
 * listener and closures per call, which cost more CPU than the rest of the
 * client's work per decision (CONTRIBUTING.md, "Hot-path rules").
 */
export interface Pending {
  readonly request: AllowRequest;
  readonly resolve: (response: AllowResponse) => void;
  readonly reject: (error: unknown) => void;
  /** The caller's signal, if any; its abort settles the call (SignalWatch). */
  readonly signal: AbortSignal | undefined;
  /** Where the call's deadline is kept (call-deadlines.ts): told when the call settles. */
  readonly deadlines: { settled(): void } | undefined;
  /** When the deadline passes (performance.now()): what is left of it goes with the request (stamped). */
  readonly deadlineAt: number;
  /** Settled: answered, or given up early (deadline, caller's signal); a later answer is ignored. */
  done: boolean;
  /** The RPC or stream batch it rides in, once sent: giving up counts its callers down. */
  rpc: RpcCall | undefined;
}

/**
 * One Allow or AllowBatch RPC, or one batch on the stream: abandoned once
 * every caller in it has given up (the RPC cancelled; the batch forgotten, so
 * a hung service does not make the stream hold batches nobody waits for),
 * with the reason the last of them gave up for.
 */
export interface RpcCall {
  readonly abandon: (reason: unknown) => void;
  waiting: number;
}

/**
 * The requests of `items` as they leave at `now` (performance.now()), each
 * saying how long its caller still waits and when it was sent
 * (AllowRequest.deadline_ms, sent_at_unix_ms): what a connection cut off by a
 * partition delivers when it heals comes after its callers gave up, and the
 * service refuses it instead of spending for them. Stamped again if sent again.
 */
export function stamped(items: Pending[], now: number): AllowRequest[] {
  const sentAt = performance.timeOrigin + now;
  const requests = new Array<AllowRequest>(items.length);
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as Pending;
    stamp(item.request, item.deadlineAt - now, sentAt);
    requests[i] = item.request;
  }
  return requests;
}

/**
 * `sentAt`: Unix time read once at start and advanced by the monotonic clock
 * (performance.timeOrigin + performance.now()), so it never jumps when the
 * system clock is set; the service only needs it not to jump.
 */
export function stamp(request: AllowRequest, remainingMs: number, sentAt: number): void {
  // Whole ms, rounded up (never less than the caller waits); at least 1, as 0 means no deadline.
  request.deadlineMs = Math.max(1, Math.ceil(remainingMs));
  request.sentAtUnixMs = sentAt;
}

export function isWaiting(item: Pending): boolean {
  return !item.done;
}

/** The RPC or batch these (still waiting) calls ride in; `abandon` once none of them waits. */
export function rideIn(items: Pending[], abandon: (reason: unknown) => void): void {
  const rpc: RpcCall = { abandon, waiting: items.length };
  for (const item of items) item.rpc = rpc;
}

/** Marks the call settled and drops its deadline and signal watch; false if it already was. */
export function finish(item: Pending): boolean {
  if (item.done) return false;
  item.done = true;
  item.deadlines?.settled();
  if (item.signal !== undefined) unwatch(item.signal, item);
  return true;
}

/** The call gave up (deadline or caller's signal): settle it with `reason`, and count its RPC down. */
export function giveUp(item: Pending, reason: unknown): void {
  if (!finish(item)) return;
  item.reject(reason);
  if (item.rpc !== undefined && --item.rpc.waiting === 0) item.rpc.abandon(reason);
}

/**
 * setTimeout callback of a call's deadline (module level: no closure per
 * call). The call gives up once this turn of the event loop has read what
 * arrived (setImmediate runs after the poll phase): timers run before I/O, so
 * on a busy or starved process a deadline and the answer that came before it
 * fall due in the same turn, and the answer must win. Giving up on it would
 * answer the caller by the failure policy while the service has spent.
 */
export function expire(item: Pending): void {
  if (!item.done) setImmediate(giveUpLate, item);
}

function giveUpLate(item: Pending): void {
  giveUp(item, new DeadlineExceeded());
}

/**
 * The calls waiting on each caller signal, behind ONE abort listener per
 * signal: callers often pass one signal to many calls (a shutdown signal, a
 * load driver's), and a listener per call on it is an EventTarget insert and
 * a linear removal each. A signal per request costs what a listener per call did.
 */
class SignalWatch {
  readonly items = new Set<Pending>();
  constructor(readonly signal: AbortSignal) {}
  readonly onAbort = () => {
    watching.delete(this.signal);
    for (const item of this.items) giveUp(item, this.signal.reason);
  };
}

const watching = new WeakMap<AbortSignal, SignalWatch>();

export function watch(signal: AbortSignal, item: Pending): void {
  let watch = watching.get(signal);
  if (watch === undefined) {
    watch = new SignalWatch(signal);
    watching.set(signal, watch);
    signal.addEventListener('abort', watch.onAbort, { once: true });
  }
  watch.items.add(item);
}

export function unwatch(signal: AbortSignal, item: Pending): void {
  const watch = watching.get(signal);
  if (watch === undefined || !watch.items.delete(item) || watch.items.size > 0) return;
  // Nobody waits on this signal any more: leave nothing behind on it.
  watching.delete(signal);
  signal.removeEventListener('abort', watch.onAbort);
}
