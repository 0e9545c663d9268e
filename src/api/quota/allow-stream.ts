import { ServerError, Status, type CallContext } from 'nice-grpc';
import type { Caller } from '../../config/callers.js';
import type { AllowBatchResult, AllowRequest, AllowStreamRequest, AllowStreamResponse } from '@quota-service/contract';
import type { CallerContext } from '../../grpc/auth-middleware.js';
import { checkBatchSize } from './decide-each.js';
import { Semaphore, SemaphorePerConnection } from './stream-semaphore.js';

/** Decides one batch (decide-each.ts, bound to the engine); never rejects. */
export type DecideBatch = (requests: readonly AllowRequest[], caller: Caller | undefined, context: CallContext & CallerContext) => Promise<AllowBatchResult[]>;

/**
 * How many batches AllowStream holds at once, read but not yet written back
 * (being decided, or decided and waiting for the caller to read the answer):
 * per stream, and per connection over all its streams. Past either bound the
 * handler stops reading, so HTTP/2 flow control pushes back on a caller that
 * sends faster than its batches are decided or never reads its answers: a
 * stream's and a connection's memory stay bounded.
 */
export const STREAM_BOUNDS = { batchesPerStream: 64, batchesPerConnection: 256 } as const;
export const MAX_BATCHES_IN_FLIGHT = STREAM_BOUNDS.batchesPerStream;

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
export function allowStreamHandler(decide: DecideBatch, draining: AbortSignal, connections = new SemaphorePerConnection(STREAM_BOUNDS.batchesPerConnection)) {
  return async function* allowStream(requests: AsyncIterable<AllowStreamRequest>, context: CallContext & CallerContext): AsyncGenerator<AllowStreamResponse> {
    const held = new HeldBatches(new Semaphore(STREAM_BOUNDS.batchesPerStream), connections, context.peer);
    const answers = new AnswerQueue();
    const reading = readBatches(requests[Symbol.asyncIterator](), context, decide, draining, answers, held);
    // Whatever ends the reading (the caller's end, a drain, a refusal, a read
    // error): answer what is in flight, then end as the reading ended.
    reading.then(
      () => answers.close(undefined),
      (error: unknown) => answers.close(error),
    );
    try {
      for (;;) {
        const ready = await answers.take();
        if (ready === undefined) break;
        for (const answer of ready) {
          // Resumed once the answer is written (and the transport drained):
          // only then is its batch's permit free for the next read.
          yield answer;
          held.giveOne();
        }
      }
      await reading;
    } finally {
      held.giveAll();
    }
  };
}

/** The permits one stream holds, one per batch read and not yet written, on its own bound and its connection's. */
class HeldBatches {
  private count = 0;
  private readonly connection: Semaphore;

  constructor(
    private readonly stream: Semaphore,
    private readonly connections: SemaphorePerConnection,
    private readonly peer: string,
  ) {
    this.connection = connections.of(peer);
  }

  /**
   * A permit on both bounds taken at once, without a promise (the usual case:
   * both have room); false, holding none, when either would have to wait or
   * `signal` aborted (then take() waits, or answers false).
   */
  tryTake(signal: AbortSignal): boolean {
    if (signal?.aborted || !this.stream.tryTake()) return false;
    if (!this.connection.tryTake()) {
      this.stream.give();
      return false;
    }
    this.count++;
    return true;
  }

  /** A permit on both bounds, or false if `signal` aborted first (then none is held). */
  async take(signal: AbortSignal): Promise<boolean> {
    if (!(await this.stream.take(signal))) return false;
    if (!(await this.connection.take(signal))) {
      this.stream.give();
      return false;
    }
    this.count++;
    return true;
  }

  giveOne(): void {
    this.count--;
    this.stream.give();
    this.connection.give();
  }

  /** The stream is over: whatever it still holds goes back to its connection. */
  giveAll(): void {
    this.connection.give(this.count);
    this.count = 0;
    this.connections.release(this.peer);
  }
}

async function readBatches(
  batches: AsyncIterator<AllowStreamRequest>,
  context: CallContext & CallerContext,
  decide: DecideBatch,
  draining: AbortSignal,
  answers: AnswerQueue,
  held: HeldBatches,
): Promise<void> {
  // The read in progress, if any: a drain stops waiting for it. (Not a
  // Promise.race against one long-lived drain promise: every race would leave
  // a reaction on it for the whole life of the stream.)
  let stopWaiting: (() => void) | undefined;
  const onDrain = () => stopWaiting?.();
  draining.addEventListener('abort', onDrain, { once: true });
  try {
    for (;;) {
      // A slot before the read: past the bounds the next batch stays unread.
      if (!held.tryTake(context.signal) && !(await held.take(context.signal))) return;
      if (draining.aborted) {
        held.giveOne();
        return;
      }
      const next = await new Promise<IteratorResult<AllowStreamRequest> | typeof DRAINED>((resolve, reject) => {
        stopWaiting = () => resolve(DRAINED);
        batches.next().then(resolve, reject);
      });
      stopWaiting = undefined;
      // Drained while waiting: a batch that arrives now is left unread, hence unanswered and undecided.
      if (next === DRAINED || next.done === true) {
        held.giveOne();
        return;
      }
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
      void decide(batch.requests, caller, context).then((results) => answers.push({ id, results }));
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

  started(): void {
    this.inFlight++;
  }

  push(answer: AllowStreamResponse): void {
    this.inFlight--;
    this.ready.push(answer);
    this.notify();
  }

  close(failure: unknown): void {
    this.ended = true;
    this.failure = failure;
    this.notify();
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
