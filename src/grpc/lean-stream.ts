import { status as GrpcStatus } from '@grpc/grpc-js';
import type { CallContext } from 'nice-grpc';
import type { CallerContext } from './auth-middleware.js';
import { statusOfError } from './error-middleware.js';
import { authenticateLean, type CallStatus, LeanCallContext, type LeanOptions, type RequestMetadata, type StreamSource } from './lean-call.js';
import { callLog } from './logging-middleware.js';

/** A bidirectional streaming method's handler as the services write it for nice-grpc: the requests, the call's context, the answers. */
export type BidiHandler = (requests: AsyncIterable<never>, context: CallContext & CallerContext) => AsyncIterable<unknown>;

/**
 * Answers handed to the transport and not yet written out before the handler
 * is made to wait until all of them are (as a Writable's 'drain'). Each one
 * waiting there has its batch's slot back already, so this is what a caller
 * that stops reading gets decided beyond the stream's bounds: no more than
 * through nice-grpc's stream (test/grpc/allow-stream-flow-control.test.ts).
 */
const WRITES_AHEAD = 8;

/**
 * A bidirectional stream on the lean path (lean-path.ts), read and answered
 * on its HTTP/2 stream (raw-stream.ts), with the steps the middleware chain
 * takes (debug lines, caller authentication when the stream opens, error
 * mapping) as plain calls, and instead of nice-grpc's adapters
 * (a Readable turned into an async iterable, one async generator per
 * middleware, a context per call) two small ones: the requests as an async
 * iterable that reads the next message from the call only when the handler
 * asks for it (so the handler's pace is what HTTP/2 flow control sees), and
 * a loop that writes each answer the handler yields.
 */
export class LeanStreamCall {
  private readonly requests: RequestQueue;
  private context: LeanCallContext | undefined;
  private cancelled = false;
  private unwritten = 0;
  private written: (() => void) | undefined;
  private headerSent = false;

  constructor(
    private readonly call: StreamSource,
    private readonly path: string,
    private readonly handler: BidiHandler,
    private readonly options: LeanOptions,
  ) {
    this.requests = new RequestQueue(() => this.call.startRead());
  }

  start(): void {
    this.call.start({
      onReceiveMetadata: (metadata) => void this.run(metadata),
      onReceiveMessage: (message) => this.requests.push(message),
      onReceiveHalfClose: () => this.requests.end(),
      onCancel: () => {
        // The caller is gone (or the call ended itself): the handler sees its
        // requests end and its signal abort, and nothing more is written.
        this.cancelled = true;
        this.context?.cancel();
        this.requests.end();
        this.wake();
      },
    });
  }

  private async run(metadata: RequestMetadata): Promise<void> {
    const { logger } = this.options;
    const log = callLog(logger, this.path, undefined);
    const context = new LeanCallContext(this.call, metadata);
    this.context = context;
    try {
      authenticateLean(this.options, this.path, context, undefined, log);
      const answers = this.handler(this.requests as AsyncIterable<never>, context as unknown as CallContext & CallerContext);
      for await (const answer of answers) {
        // Once cancelled the handler still runs to its end (what it holds is
        // given back there); its answers have nowhere to go.
        if (this.cancelled) continue;
        const wait = this.write(answer, context);
        if (wait !== undefined) await wait;
      }
      log?.finished();
      this.end(context, { code: GrpcStatus.OK, details: 'OK' });
    } catch (error) {
      const failure = statusOfError(error, this.path, logger);
      log?.failed(failure.code);
      this.end(context, failure);
    }
  }

  /** Hands one answer to the transport; a promise to wait for when WRITES_AHEAD are being written, kept until all are. */
  private write(answer: unknown, context: LeanCallContext): Promise<void> | undefined {
    this.sendHeaderOnce(context);
    this.unwritten++;
    this.call.sendMessage(answer, () => {
      this.unwritten--;
      this.wake();
    });
    if (this.unwritten < WRITES_AHEAD) return undefined;
    return new Promise((resolve) => (this.written = resolve));
  }

  private wake(): void {
    if (!this.cancelled && this.unwritten > 0) return;
    const written = this.written;
    this.written = undefined;
    written?.();
  }

  /** The status, after the answers handed over (written behind them); a no-op once cancelled. */
  private end(context: LeanCallContext, status: CallStatus): void {
    this.sendHeaderOnce(context);
    this.call.sendStatus(status, context.trailers());
  }

  /** A header the handler set goes out before the first answer (or the status), as nice-grpc sends it. */
  private sendHeaderOnce(context: LeanCallContext): void {
    if (this.headerSent) return;
    this.headerSent = true;
    const headers = context.headers();
    if (headers !== null) this.call.sendMetadata(headers);
  }
}

/**
 * The messages of one stream as an async iterable: next() asks the call for
 * one message (it delivers one per read) only when none is waiting, and
 * ends when the caller half-closes or the call is cancelled.
 */
class RequestQueue implements AsyncIterableIterator<unknown> {
  private readonly ready: unknown[] = [];
  private ended = false;
  private reading = false;
  private waiting: ((result: IteratorResult<unknown>) => void) | undefined;

  constructor(private readonly read: () => void) {}

  push(message: unknown): void {
    this.reading = false;
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting !== undefined) waiting({ value: message, done: false });
    else this.ready.push(message);
  }

  end(): void {
    this.ended = true;
    this.reading = false;
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.ready.length > 0) return Promise.resolve({ value: this.ready.shift(), done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    // Waiting before reading: the call may deliver a queued message inside startRead.
    const next = new Promise<IteratorResult<unknown>>((resolve) => (this.waiting = resolve));
    if (!this.reading) {
      this.reading = true;
      this.read();
    }
    return next;
  }

  /** The handler stopped reading: nothing more is asked of the call. */
  return(): Promise<IteratorResult<unknown>> {
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
