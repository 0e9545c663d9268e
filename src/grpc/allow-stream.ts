import { ServerError, Status, type CallContext } from 'nice-grpc';
import type { Caller } from '../config/callers.js';
import type { AllowBatchResult, AllowRequest, AllowStreamRequest, AllowStreamResponse } from '@quota-service/contract';
import type { CallerContext } from './auth-middleware.js';
import { checkBatchSize } from './decide-each.js';

/** Decides one batch (decide-each.ts, bound to the engine); never rejects. */
export type DecideBatch = (requests: readonly AllowRequest[], caller: Caller | undefined) => Promise<AllowBatchResult[]>;

/**
 * Batches of one stream being decided at once. Past it the handler stops
 * reading, so HTTP/2 flow control pushes back on a caller that sends faster
 * than its batches are decided (or never reads its answers): a stream's
 * memory stays bounded.
 */
export const MAX_BATCHES_IN_FLIGHT = 64;

/**
 * rpc AllowStream: each message is a batch, decided as AllowBatch decides
 * one, answered with its `id` as soon as it is decided (so answers may pass
 * each other). The stream ends:
 * - with OK when the caller ends its side, or when `draining` aborts (the
 *   server shuts down): it stops reading, answers every batch it has read,
 *   then ends. A batch unanswered at an OK end was never decided, and the
 *   client may send it again elsewhere;
 * - with UNAUTHENTICATED once the stream's token is revoked (the callers file
 *   reloaded without it), and INVALID_ARGUMENT for a batch over the bound:
 *   also only after answering the batches already being decided.
 */
export function allowStreamHandler(decide: DecideBatch, draining: AbortSignal) {
  return async function* allowStream(requests: AsyncIterable<AllowStreamRequest>, context: CallContext & CallerContext): AsyncGenerator<AllowStreamResponse> {
    const answers = new AnswerQueue();
    const reading = readBatches(requests[Symbol.asyncIterator](), context, decide, draining, answers);
    // Whatever ends the reading (the caller's end, a drain, a refusal, a read
    // error): answer what is in flight, then end as the reading ended.
    reading.then(
      () => answers.close(undefined),
      (error: unknown) => answers.close(error),
    );
    for (;;) {
      const ready = await answers.take();
      if (ready === undefined) break;
      for (const answer of ready) yield answer;
    }
    await reading;
  };
}

async function readBatches(
  batches: AsyncIterator<AllowStreamRequest>,
  context: CallContext & CallerContext,
  decide: DecideBatch,
  draining: AbortSignal,
  answers: AnswerQueue,
): Promise<void> {
  // The read in progress, if any: a drain stops waiting for it. (Not a
  // Promise.race against one long-lived drain promise: every race would leave
  // a reaction on it for the whole life of the stream.)
  let stopWaiting: (() => void) | undefined;
  const onDrain = () => stopWaiting?.();
  draining.addEventListener('abort', onDrain, { once: true });
  try {
    for (;;) {
      if (answers.inFlight >= MAX_BATCHES_IN_FLIGHT) await answers.slotFree();
      if (draining.aborted) return;
      const next = await new Promise<IteratorResult<AllowStreamRequest> | typeof DRAINED>((resolve, reject) => {
        stopWaiting = () => resolve(DRAINED);
        batches.next().then(resolve, reject);
      });
      stopWaiting = undefined;
      // Drained while waiting: a batch that arrives now is left unread, hence unanswered and undecided.
      if (next === DRAINED || next.done === true) return;
      const batch = next.value;
      // Authorization per batch: a token revoked since the stream opened stops the stream here.
      let caller: Caller | undefined;
      if (context.currentCaller !== undefined) {
        caller = context.currentCaller();
        if (caller === undefined) throw new ServerError(Status.UNAUTHENTICATED, 'bearer token no longer valid');
      }
      checkBatchSize(batch.requests);
      answers.started();
      const id = batch.id;
      void decide(batch.requests, caller).then((results) => answers.push({ id, results }));
    }
  } finally {
    // The signal is the server's and outlives this stream.
    draining.removeEventListener('abort', onDrain);
  }
}

const DRAINED = Symbol('drained');

/**
 * The answers of one stream, decided in any order, handed to the writer in
 * groups: take() resolves with everything ready, or undefined once reading has
 * ended and every started batch is answered.
 */
class AnswerQueue {
  inFlight = 0;
  private ready: AllowStreamResponse[] = [];
  private ended = false;
  private failure: unknown;
  private wake: (() => void) | undefined;
  private slotWaiter: (() => void) | undefined;

  started(): void {
    this.inFlight++;
  }

  push(answer: AllowStreamResponse): void {
    this.inFlight--;
    this.ready.push(answer);
    this.notify();
    const waiter = this.slotWaiter;
    this.slotWaiter = undefined;
    waiter?.();
  }

  close(failure: unknown): void {
    this.ended = true;
    this.failure = failure;
    this.notify();
  }

  slotFree(): Promise<void> {
    return new Promise((resolve) => (this.slotWaiter = resolve));
  }

  async take(): Promise<AllowStreamResponse[] | undefined> {
    while (this.ready.length === 0) {
      if (this.ended && this.inFlight === 0) {
        if (this.failure !== undefined) throw this.failure;
        return undefined;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    const ready = this.ready;
    this.ready = [];
    return ready;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
