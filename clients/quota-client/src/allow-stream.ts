import type { AllowBatchResult, AllowRequest, AllowStreamResponse } from '@quota-service/contract';
import type { OpenStream, StreamCall } from './stream-call.js';

/** One batch on the stream, waiting for its answer. */
export interface StreamBatch {
  readonly requests: AllowRequest[];
  /** One result per request, in request order. */
  resolve(results: AllowBatchResult[]): void;
  /** A ClientError when the stream failed; StreamEnded when it ended cleanly without answering. */
  reject(error: unknown): void;
}

/**
 * The stream ended with OK (the service drained, or the client ended it)
 * before answering the batch: the service answers every batch it has read
 * before such an end, so this one was never decided and may be sent again.
 */
export class StreamEnded extends Error {
  override name = 'StreamEnded';
}

/**
 * A stream unused this long is ended: an open stream keeps the process alive
 * (grpc-js refs the connection while a call is open) and pins the client to
 * one service instance. The next batch opens a new one, for about the cost of
 * one unary call.
 */
export const STREAM_IDLE_MS = 5_000;
/**
 * A stream older than this takes no new batches: the next batch opens a new
 * stream, which the channel's load balancer may place on another instance (a
 * long-lived stream would otherwise never see instances added after it opened).
 */
export const STREAM_MAX_AGE_MS = 60_000;

/** Stream renewal, for tests: defaults STREAM_IDLE_MS and STREAM_MAX_AGE_MS. */
export interface StreamTiming {
  idleMs?: number;
  maxAgeMs?: number;
}

/**
 * One AllowStream call: batches go out as messages with an id, answers come
 * back by id in any order. Used by the Batcher (batcher.ts) instead of one
 * AllowBatch call per batch: the HTTP/2 stream, headers, trailers and
 * grpc-js's per-call machinery are paid once per stream rather than once per
 * batch, which at one request in flight is most of what a call costs
 * (docs/benchmarks.md).
 */
export class AllowStream {
  private readonly call: StreamCall;
  private readonly waiting = new Map<number, StreamBatch>();
  private readonly openedAt = performance.now();
  private lastId = 0;
  private ended = false;
  private retired = false;
  private lastAnswerAt = Number.NEGATIVE_INFINITY;
  /**
   * Set when nobody waits, and left set while batches come and go: when it
   * fires it ends the stream only if nobody has waited for idleMs, else it
   * is set again for the rest (one timer per idle period, not one per batch).
   */
  private idleTimer: NodeJS.Timeout | undefined;
  /** When the last batch waiting was answered or forgotten (performance.now()). */
  private idleSince = 0;

  private readonly idleMs: number;
  private readonly maxAgeMs: number;

  constructor(open: OpenStream, timing: StreamTiming = {}) {
    this.idleMs = timing.idleMs ?? STREAM_IDLE_MS;
    this.maxAgeMs = timing.maxAgeMs ?? STREAM_MAX_AGE_MS;
    this.call = open({ answer: (answer) => this.answered(answer), ended: (failure) => this.closed(failure) });
  }

  /** False once ended, failed, idle or too old: send new batches on a new stream. */
  get usable(): boolean {
    return !this.ended && performance.now() - this.openedAt < this.maxAgeMs;
  }

  /** Batches sent and not yet answered, failed or forgotten. */
  get unanswered(): number {
    return this.waiting.size;
  }

  /** Sends the batch; returns its id, for forget(). */
  send(batch: StreamBatch): number {
    // Unique among this stream's unanswered batches: 2^32 batches would have to be in flight to collide.
    this.lastId = (this.lastId + 1) >>> 0;
    this.waiting.set(this.lastId, batch);
    this.call.send({ id: this.lastId, requests: batch.requests });
    return this.lastId;
  }

  /** Nobody waits for batch `id` any more: drop it now, and its answer when it comes. */
  forget(id: number): void {
    if (this.waiting.delete(id) && this.waiting.size === 0) this.nobodyWaits();
  }

  /** Whether an answer arrived at or after `time` (performance.now()). */
  answeredSince(time: number): boolean {
    return this.lastAnswerAt >= time;
  }

  /**
   * The stream looks hung: it takes no new batch, and its call is cancelled
   * once no batch on it is waiting any more. Not before: a batch already sent
   * may have been decided, so it is neither failed early nor sent again.
   */
  retire(): void {
    this.retired = true;
    this.end();
    if (this.waiting.size === 0) this.call.cancel();
  }

  /** No more batches: the service answers those it has, then ends the stream. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.idleTimer);
    this.call.end();
  }

  private answered(answer: AllowStreamResponse): void {
    this.lastAnswerAt = performance.now();
    const batch = this.waiting.get(answer.id);
    if (batch === undefined) return;
    this.waiting.delete(answer.id);
    if (this.waiting.size === 0) this.nobodyWaits();
    batch.resolve(answer.results);
  }

  /** The call is over (failure undefined: with OK): every batch still waiting fails with it. */
  private closed(failure: unknown): void {
    this.end();
    const unanswered = [...this.waiting.values()];
    this.waiting.clear();
    const reason = failure ?? new StreamEnded('AllowStream ended before answering the batch');
    for (const batch of unanswered) batch.reject(reason);
  }

  private nobodyWaits(): void {
    if (this.retired) this.call.cancel();
    else if (!this.ended) {
      this.idleSince = performance.now();
      this.idleTimer ??= this.idleTimerIn(this.idleMs);
    }
  }

  private idleTimerIn(ms: number): NodeJS.Timeout {
    const timer = setTimeout(this.onIdleTimer, ms);
    // It only ends the stream: it need not keep the process alive itself.
    timer.unref();
    return timer;
  }

  private readonly onIdleTimer = (): void => {
    this.idleTimer = undefined;
    // Busy now: the timer is set again once nobody waits.
    if (this.ended || this.waiting.size > 0) return;
    const idleFor = performance.now() - this.idleSince;
    if (idleFor >= this.idleMs) this.end();
    else this.idleTimer = this.idleTimerIn(this.idleMs - idleFor);
  };
}
