import { ClientError, Status } from 'nice-grpc';
import type { AllowRequest, AllowResponse, QuotaServiceClient } from '../../src/gen/quota/v1/quota.js';
import type { BatchOptions } from './types.js';

/** Sends one AllowRequest and resolves with its answer; rejects with a ClientError, or the signal's reason. */
export type Send = (request: AllowRequest, signal: AbortSignal) => Promise<AllowResponse>;

const ALLOW_PATH = '/quota.v1.QuotaService/Allow';

export function unarySender(client: QuotaServiceClient): Send {
  return (request, signal) => client.allow(request, { signal });
}

interface Pending {
  request: AllowRequest;
  signal: AbortSignal;
  resolve(response: AllowResponse): void;
  reject(error: unknown): void;
  /** Settled early by its own signal (deadline or caller); the batch answer is then ignored. */
  done: boolean;
  /** The batch RPC it rides in, once sent: its abort counts down the batch's callers. */
  batch?: BatchCall;
}

/** One AllowBatch RPC: cancelled once every caller in it has given up. */
interface BatchCall {
  readonly controller: AbortController;
  waiting: number;
}

/**
 * Coalesces concurrent calls into AllowBatch calls: the first queued call
 * opens a window of `maxDelayMs` (0: until the current event-loop turn ends),
 * and the window closes early when `maxSize` calls are queued. A window
 * holding a single call sends a plain Allow. Each caller keeps its own
 * deadline: a call whose signal fires settles at once, and the batch RPC is
 * cancelled only when every call in it has given up.
 */
export class Batcher {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** Set when the server lacks AllowBatch (UNIMPLEMENTED): from then on, one Allow per call. */
  private unaryOnly = false;

  constructor(
    private readonly client: QuotaServiceClient,
    private readonly options: BatchOptions,
  ) {}

  readonly send: Send = (request, signal) =>
    new Promise<AllowResponse>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const item: Pending = { request, signal, resolve, reject, done: false };
      // One listener per call does both jobs (settle the caller, count down its batch):
      // an EventTarget listener is a noticeable part of the caller's CPU per decision.
      signal.addEventListener(
        'abort',
        () => {
          if (!item.done) {
            item.done = true;
            reject(signal.reason);
          }
          if (item.batch !== undefined && --item.batch.waiting === 0) item.batch.controller.abort();
        },
        { once: true },
      );
      this.queue.push(item);
      if (this.queue.length >= this.options.maxSize) this.flush();
      else if (this.timer === undefined) {
        this.timer = this.options.maxDelayMs > 0 ? setTimeout(() => this.flush(), this.options.maxDelayMs) : setImmediate(() => this.flush());
      }
    });

  /** Sends whatever is queued now. */
  flush(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer as NodeJS.Timeout);
      clearImmediate(this.timer as NodeJS.Immediate);
      this.timer = undefined;
    }
    const items = this.queue.filter((item) => !item.done);
    this.queue = [];
    if (items.length === 0) return;
    if (items.length === 1 || this.unaryOnly) {
      for (const item of items) this.sendUnary(item);
      return;
    }
    void this.sendBatch(items);
  }

  private sendUnary(item: Pending): void {
    this.client.allow(item.request, { signal: item.signal }).then(
      (response) => settle(item, () => item.resolve(response)),
      (error: unknown) => settle(item, () => item.reject(error)),
    );
  }

  private async sendBatch(items: Pending[]): Promise<void> {
    // Cancel the RPC only once nobody waits for it any more.
    const controller = new AbortController();
    // Every item is still waiting here (flush dropped the settled ones), so its
    // abort listener (send) has not fired yet and will count this batch down.
    const batch: BatchCall = { controller, waiting: items.length };
    for (const item of items) item.batch = batch;
    let results;
    try {
      ({ results } = await this.client.allowBatch({ requests: items.map((item) => item.request) }, { signal: controller.signal }));
    } catch (error) {
      if (error instanceof ClientError && error.code === Status.UNIMPLEMENTED) {
        // An older service: fall back to one Allow per call, for good.
        this.unaryOnly = true;
        for (const item of items) if (!item.done) this.sendUnary(item);
        return;
      }
      for (const item of items) settle(item, () => item.reject(error));
      return;
    }
    if (results.length !== items.length) {
      const error = new ClientError(ALLOW_PATH, Status.INTERNAL, `AllowBatch answered ${results.length} results for ${items.length} requests`);
      for (const item of items) settle(item, () => item.reject(error));
      return;
    }
    items.forEach((item, index) => {
      const result = results[index];
      if (result?.response !== undefined) {
        const response = result.response;
        settle(item, () => item.resolve(response));
      } else {
        // The service names the item inside the batch (`requests[3].cost: ...`);
        // the caller sent one request, so it sees what Allow would have said.
        const code = (result?.error?.code ?? Status.INTERNAL) as Status;
        const message = (result?.error?.message ?? 'AllowBatch result has neither response nor error').replace(/^requests\[\d+\](\.|: )/, '');
        settle(item, () => item.reject(new ClientError(ALLOW_PATH, code, message)));
      }
    });
  }
}

function settle(item: Pending, action: () => void): void {
  if (item.done) return;
  item.done = true;
  action();
}
