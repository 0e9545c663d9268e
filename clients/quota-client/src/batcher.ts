import { ClientError, Status } from 'nice-grpc';
import type { AllowBatchResult, AllowRequest, AllowResponse } from '@quota-service/contract';
import { AllowStream, StreamEnded, type StreamTiming } from './allow-stream.js';
import { callDeadline, DeadlineExceeded } from './call-deadline.js';
import { expire, finish, isWaiting, type Pending, rideIn, stamp, stamped, watch } from './pending-call.js';
import type { QuotaRpcClient } from './service-definition.js';
import type { BatchOptions } from './types.js';

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
 * Coalesces concurrent calls into batches: the first queued call opens a
 * window of `maxDelayMs` (0: until the current event-loop turn ends), and the
 * window closes early when `maxSize` calls are queued. Each batch goes out as
 * one message of a long-lived AllowStream (allow-stream.ts), or, with
 * `stream: false` or against a service without AllowStream, as one AllowBatch
 * call (a window holding a single call then sends a plain Allow). Each caller
 * keeps its own deadline: a call whose deadline passes or whose signal aborts
 * settles at once; an RPC is cancelled only when every call in it has given up
 * (a stream's batch is not: its late answer is ignored).
 */
export class Batcher {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** Set when the server lacks AllowStream (UNIMPLEMENTED): from then on, AllowBatch calls. */
  private streamUnsupported: boolean;
  /** Set when the server lacks AllowBatch (UNIMPLEMENTED): from then on, one Allow per call. */
  private unaryOnly = false;
  private stream: AllowStream | undefined;
  private readonly flushNow = () => this.flush();

  constructor(
    private readonly client: QuotaRpcClient,
    private readonly options: BatchOptions & { stream: boolean; streamTiming?: StreamTiming },
  ) {
    this.streamUnsupported = !options.stream;
  }

  readonly send: Send = (request, deadlineMs, signal) =>
    new Promise<AllowResponse>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const item: Pending = { request, resolve, reject, signal, timer: undefined, deadlineAt: performance.now() + deadlineMs, done: false, rpc: undefined };
      // Node keeps timers of one duration in one list behind one native timer,
      // so a deadline per call is a list insert, not a kernel timer.
      item.timer = setTimeout(expire, deadlineMs, item);
      // As AbortSignal.timeout's: a pending deadline does not keep the process alive.
      item.timer.unref();
      if (signal !== undefined) watch(signal, item);
      this.queue.push(item);
      if (this.queue.length >= this.options.maxSize) this.flush();
      else if (this.timer === undefined) {
        this.timer = this.options.maxDelayMs > 0 ? setTimeout(this.flushNow, this.options.maxDelayMs) : setImmediate(this.flushNow);
      }
    });

  /** Sends whatever is queued now. */
  flush(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer as NodeJS.Timeout);
      clearImmediate(this.timer as NodeJS.Immediate);
      this.timer = undefined;
    }
    const items = this.queue.filter(isWaiting);
    this.queue = [];
    if (items.length === 0) return;
    if (!this.streamUnsupported) {
      this.sendOnStream(items, true);
      return;
    }
    this.sendCalls(items);
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
      stream = this.stream = new AllowStream(this.client, this.options.streamTiming);
    }
    const sentAt = performance.now();
    const requests = stamped(items, sentAt);
    const id = stream.send({
      requests,
      resolve: (results) => this.deliver(items, results, 'AllowStream'),
      reject: (error) => this.streamFailed(items, error, mayResend),
    });
    const sentOn = stream;
    rideIn(items, (reason) => {
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
    let results: AllowBatchResult[];
    try {
      ({ results } = await this.client.allowBatch({ requests }, { signal: controller.signal }));
    } catch (error) {
      if (error instanceof ClientError && error.code === Status.UNIMPLEMENTED) {
        // An older service: fall back to one Allow per call, for good.
        this.unaryOnly = true;
        for (const item of items) if (!item.done) this.sendUnary(item);
        return;
      }
      for (const item of items) this.fail(item, error);
      return;
    }
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
