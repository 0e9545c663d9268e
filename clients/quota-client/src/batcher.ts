import { ClientError, Status } from 'nice-grpc';
import type { AllowBatchResult, AllowRequest, AllowResponse } from '@quota-service/contract';
import { AllowStream, StreamEnded, type StreamTiming } from './allow-stream.js';
import { callDeadline, DeadlineExceeded } from './call-deadline.js';
import { CallDeadlines } from './call-deadlines.js';
import { expire, finish, isWaiting, type Pending, rideIn, stamp, stamped, watch } from './pending-call.js';
import type { QuotaRpcClient } from './service-definition.js';
import { niceGrpcStream, type OpenStream } from './stream-call.js';
import type { BatchOptions } from './types.js';
import { PACING, SendPacer } from '@quota-service/core';

/**
 * Sends one AllowRequest and resolves with its answer. Rejects with a
 * ClientError, with DeadlineExceeded once `deadlineMs` has passed, or with the
 * caller's signal's reason once it aborts (at once if it already has).
 */
export type Send = (request: AllowRequest, deadlineMs: number, signal: AbortSignal | undefined) => Promise<AllowResponse>;

const ALLOW_PATH = '/quota.v1.QuotaService/Allow';

/** One Allow RPC per call (`batch: false`): nice-grpc cancels through a signal, so each call gets one. */
export function unarySender(client: QuotaRpcClient): Send {
  return async (request, deadlineMs, signal) => {
    const deadline = callDeadline(deadlineMs, signal);
    stamp(request, deadlineMs, performance.timeOrigin + performance.now());
    try {
      return await client.allow(request, { signal: deadline.signal });
    } catch (error) {
      // nice-grpc rejects an aborted call with its own AbortError; say which signal it was.
      if (deadline.signal.aborted) throw deadline.signal.reason;
      throw error;
    } finally {
      deadline.release();
    }
  };
}

/**
 * Coalesces concurrent calls into batches. With `maxDelayMs: 0` (the default)
 * a SendPacer (@quota-service/core) says when they go: a call that finds no
 * batch in flight goes out at the end of its turn, with every call made by
 * then; behind a batch in flight, the calls one turn made together (the
 * callers an answer released) go as a second batch, and a call made alone
 * rides the next, sent when a batch answers or the hold passes. Alone, a call
 * waits for nothing; under load the batches grow on their own. With
 * `maxDelayMs > 0` the first queued call opens a window of that length
 * instead. Either way a batch goes at once when `maxSize` calls are queued.
 *
 * Each batch goes out as one message of a long-lived AllowStream
 * (allow-stream.ts), or, with `stream: false` or against a service without
 * AllowStream, as one AllowBatch call (a batch holding a single call then
 * sends a plain Allow). Each caller keeps its own deadline: a call whose
 * deadline passes or whose signal aborts settles at once; an RPC is cancelled
 * only when every call in it has given up (a stream's batch is not: its late
 * answer is ignored), and a batch nobody waits for no longer holds back the
 * next.
 */
export class Batcher {
  private queue: Pending[] = [];
  /** Every call's deadline, on one timer (call-deadlines.ts); a call past it gives up (expire). */
  private readonly deadlines = new CallDeadlines<Pending>(expire);
  /** The window of `maxDelayMs > 0`. */
  private timer: NodeJS.Timeout | undefined;
  /** With `maxDelayMs: 0`: when the queue goes; it counts the batches in flight. */
  private readonly pacer: SendPacer | undefined;
  /** Set when the server lacks AllowStream (UNIMPLEMENTED): from then on, AllowBatch calls. */
  private streamUnsupported: boolean;
  /** Set when the server lacks AllowBatch (UNIMPLEMENTED): from then on, one Allow per call. */
  private unaryOnly = false;
  private stream: AllowStream | undefined;
  private readonly openStream: OpenStream;
  private readonly flushNow = () => this.flush();

  constructor(
    private readonly client: QuotaRpcClient,
    /**
     * `openStream`: how an AllowStream call is opened (stream-call.ts); through
     * `client` unless given. `holdMs`: PACING's unless given (tests).
     */
    private readonly options: BatchOptions & { stream: boolean; openStream?: OpenStream; streamTiming?: StreamTiming; holdMs?: number },
  ) {
    this.streamUnsupported = !options.stream;
    this.openStream = options.openStream ?? niceGrpcStream(client);
    if (options.maxDelayMs === 0) {
      const pacing = { ...PACING, holdMs: options.holdMs ?? PACING.holdMs };
      this.pacer = new SendPacer(
        () => this.queue.length,
        (parts) => this.flush(parts),
        pacing,
      );
    }
  }

  readonly send: Send = (request, deadlineMs, signal) =>
    new Promise<AllowResponse>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const deadlines = this.deadlines;
      const item: Pending = { request, resolve, reject, signal, deadlines, deadlineAt: performance.now() + deadlineMs, done: false, rpc: undefined };
      deadlines.add(item);
      if (signal !== undefined) watch(signal, item);
      this.queue.push(item);
      if (this.queue.length >= this.options.maxSize) this.flush();
      else this.schedule();
    });

  /** When what is queued goes: a window's end, or what the pacer says. */
  private schedule(): void {
    if (this.pacer !== undefined) this.pacer.schedule();
    else if (this.queue.length > 0) this.timer ??= setTimeout(this.flushNow, this.options.maxDelayMs);
  }

  /** Counts a batch in flight (with the pacer); the function it returns counts it out (once). */
  private inFlight(): () => void {
    return this.pacer?.sent() ?? (() => {});
  }

  /** Sends whatever is queued now, in `parts` batches of about the same size. */
  flush(parts = 1): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.pacer?.flushing();
    const items = this.queue.filter(isWaiting);
    this.queue = [];
    const size = Math.ceil(items.length / parts);
    for (let start = 0; start < items.length; start += size) {
      const batch = size >= items.length ? items : items.slice(start, start + size);
      if (this.streamUnsupported) this.sendCalls(batch);
      else this.sendOnStream(batch, true);
    }
  }

  /** Batches sent on streams and still waiting for an answer (diagnostics and tests). */
  get unansweredBatches(): number {
    return this.stream?.unanswered ?? 0;
  }

  /** Sends what is queued, then ends the stream: the service answers what it has read. */
  close(): void {
    this.flush();
    this.stream?.end();
  }

  /** One AllowBatch call for the batch, or one Allow per call. */
  private sendCalls(items: Pending[]): void {
    if (items.length === 1 || this.unaryOnly) {
      for (const item of items) this.sendUnary(item);
      return;
    }
    void this.sendBatch(items);
  }

  /**
   * The batch as one message of the open stream (a new one if there is none,
   * or it is ended, idle or old). A batch the stream left unanswered at a
   * clean end was never decided (a draining service answers what it read), so
   * it is sent once more on a new stream.
   */
  private sendOnStream(items: Pending[], mayResend: boolean): void {
    let stream = this.stream;
    if (stream === undefined || !stream.usable) {
      stream?.end();
      stream = this.stream = new AllowStream(this.openStream, this.options.streamTiming);
    }
    const sentAt = performance.now();
    const requests = stamped(items, sentAt);
    const landed = this.inFlight();
    const id = stream.send({
      requests,
      resolve: (results) => {
        landed();
        this.deliver(items, results, 'AllowStream');
      },
      reject: (error) => {
        landed();
        this.streamFailed(items, error, mayResend);
      },
    });
    const sentOn = stream;
    rideIn(items, (reason) => {
      landed();
      sentOn.forget(id);
      // Every caller's deadline passed and the stream has answered nothing
      // since this batch left: it looks hung (a stuck instance keeps its
      // connection open). The next batch opens a new stream, which the
      // channel may place on another instance, rather than every batch
      // waiting out its deadline here until the stream's maximum age.
      if (reason instanceof DeadlineExceeded && !sentOn.answeredSince(sentAt)) sentOn.retire();
    });
  }

  private streamFailed(items: Pending[], error: unknown, mayResend: boolean): void {
    const waiting = items.filter(isWaiting);
    if (waiting.length === 0) return;
    if (error instanceof StreamEnded && mayResend) {
      this.sendOnStream(waiting, false);
      return;
    }
    if (error instanceof ClientError && error.code === Status.UNIMPLEMENTED) {
      // An older service: nothing was decided; AllowBatch from now on, for good.
      this.streamUnsupported = true;
      this.sendCalls(waiting);
      return;
    }
    for (const item of waiting) this.fail(item, error);
  }

  private sendUnary(item: Pending): void {
    const controller = new AbortController();
    rideIn([item], () => controller.abort());
    const now = performance.now();
    stamp(item.request, item.deadlineAt - now, performance.timeOrigin + now);
    this.client.allow(item.request, { signal: controller.signal }).then(
      (response) => this.answer(item, response),
      (error: unknown) => this.fail(item, error),
    );
  }

  private async sendBatch(items: Pending[]): Promise<void> {
    const controller = new AbortController();
    rideIn(items, () => controller.abort());
    const requests = stamped(items, performance.now());
    const landed = this.inFlight();
    let results: AllowBatchResult[];
    try {
      ({ results } = await this.client.allowBatch({ requests }, { signal: controller.signal }));
    } catch (error) {
      landed();
      if (error instanceof ClientError && error.code === Status.UNIMPLEMENTED) {
        // An older service: fall back to one Allow per call, for good.
        this.unaryOnly = true;
        for (const item of items) if (!item.done) this.sendUnary(item);
        return;
      }
      for (const item of items) this.fail(item, error);
      return;
    }
    landed();
    this.deliver(items, results, 'AllowBatch');
  }

  /** Each caller gets its own result; an item error becomes what Allow would have failed with. */
  private deliver(items: Pending[], results: AllowBatchResult[], rpc: string): void {
    if (results.length !== items.length) {
      const error = new ClientError(ALLOW_PATH, Status.INTERNAL, `${rpc} answered ${results.length} results for ${items.length} requests`);
      for (const item of items) this.fail(item, error);
      return;
    }
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as Pending;
      const result = results[i];
      if (result?.response !== undefined) this.answer(item, result.response);
      else {
        // The service names the item inside the batch (`requests[3].cost: ...`);
        // the caller sent one request, so it sees what Allow would have said.
        const code = (result?.error?.code ?? Status.INTERNAL) as Status;
        const message = (result?.error?.message ?? `${rpc} result has neither response nor error`).replace(/^requests\[\d+\](\.|: )/, '');
        this.fail(item, new ClientError(ALLOW_PATH, code, message));
      }
    }
  }

  private answer(item: Pending, response: AllowResponse): void {
    if (finish(item)) item.resolve(response);
  }

  private fail(item: Pending, error: unknown): void {
    if (finish(item)) item.reject(error);
  }
}
