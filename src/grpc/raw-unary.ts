import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { type Metadata as GrpcMetadata, status as GrpcStatus } from '@grpc/grpc-js';
import type { CallContext } from 'nice-grpc';
import type { CallerContext } from './auth-middleware.js';
import { statusOfError } from './error-middleware.js';
import { authenticateLean, type CallStatus, LeanCallContext, type LeanOptions } from './lean-call.js';
import { callLog } from './logging-middleware.js';
import { NOT_SERIALIZED, RawCall, type RawCallLimits, type RawMethod, tooLarge } from './raw-call.js';

/** A unary method's handler as the services write it for nice-grpc: the request, the call's context, the answer. */
export type UnaryHandler = (request: never, context: CallContext & CallerContext) => Promise<unknown>;

/**
 * A unary call on the lean path, read and answered on its HTTP/2 stream
 * (raw-streams.ts hands it over): the one framed request is read whole,
 * decoded with the method's own decoder and answered with the steps the
 * middleware chain takes (debug lines, caller authentication, error mapping),
 * in the frames, headers and trailers grpc-js would send. What grpc-js does
 * per call besides (its metadata object, its intercepting-call layers, a
 * listener per event) is not done. A request this does not read (compressed,
 * a malformed timeout) never gets here: grpc-js serves it.
 */
export class RawUnaryCall extends RawCall {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** The first frame's length, once its prefix has arrived. */
  private declared: number | undefined;
  private finished = false;
  private readonly timer: NodeJS.Timeout | undefined;
  private context: LeanCallContext | undefined;

  constructor(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    deadline: number,
    method: RawMethod,
    private readonly handler: UnaryHandler,
    private readonly options: LeanOptions & RawCallLimits,
  ) {
    super(stream, headers, deadline, method);
    this.timer = this.deadlineTimer(() => this.fail({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }));
    stream.on('data', (chunk: Buffer) => this.read(chunk));
    stream.once('end', () => this.answer());
    stream.once('close', () => this.closed());
  }

  /** The handler's own header (sendHeader), before the answer. */
  sendMetadata(metadata: GrpcMetadata): void {
    if (this.finished || this.gone()) return;
    this.sendHeaders(metadata);
  }

  private read(chunk: Buffer): void {
    if (this.finished) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size < 5) return;
    // The request's declared length, checked as soon as it is known, as grpc-js checks it.
    this.declared ??= (this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks)).readUInt32BE(1);
    const refused = tooLarge(this.declared, this.options.maxReceiveBytes);
    if (refused !== undefined) {
      this.fail(refused);
    } else if (this.size > 5 + this.declared) {
      this.fail({ code: GrpcStatus.UNIMPLEMENTED, details: `Received a second request message for server streaming method ${this.method.path}` });
    }
  }

  private answer(): void {
    if (this.finished) return;
    const bytes = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    this.chunks.length = 0;
    if (this.declared === undefined || bytes.length < 5 + this.declared) {
      this.fail({ code: GrpcStatus.UNIMPLEMENTED, details: `Received no request message for server streaming method ${this.method.path}` });
      return;
    }
    let request: unknown;
    try {
      request = this.method.deserialize(bytes.subarray(5));
    } catch {
      this.fail({ code: GrpcStatus.INTERNAL, details: 'Error deserializing request' });
      return;
    }
    this.run(request);
  }

  private run(request: unknown): void {
    const { logger } = this.options;
    const path = this.method.path;
    const log = callLog(logger, path, request);
    const context = new LeanCallContext(this, this.metadata());
    this.context = context;
    let answered: Promise<unknown>;
    try {
      authenticateLean(this.options, path, context, request, log);
      answered = this.handler(request as never, context as unknown as CallContext & CallerContext);
    } catch (error) {
      answered = Promise.reject(error);
    }
    answered.then(
      (response) => {
        log?.finished();
        this.succeed(response, context);
      },
      (error: unknown) => {
        const failure = statusOfError(error, path, logger);
        log?.failed(failure.code);
        this.fail(failure, context);
      },
    );
  }

  private succeed(response: unknown, context: LeanCallContext): void {
    if (this.finished || this.gone()) return;
    const frame = this.frameOf(response);
    if (frame === undefined) {
      this.fail(NOT_SERIALIZED, context);
      return;
    }
    this.finish();
    this.sendHeaders(context.headers());
    this.sendStatusFrames({ code: GrpcStatus.OK, details: 'OK' }, context.trailers(), frame);
  }

  private fail(status: CallStatus, context = this.context): void {
    if (this.finished || this.gone()) return;
    this.finish();
    const headers = context?.headers() ?? null;
    if (headers !== null) this.sendHeaders(headers);
    this.sendStatusFrames(status, context?.trailers() ?? null);
    // Whatever the caller still sends is read and dropped.
    this.stream.resume();
  }

  private finish(): void {
    this.finished = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  /** The stream closed: answered, or the caller gave up (reset, a dropped connection) before the answer. */
  private closed(): void {
    if (this.finished) return;
    this.finish();
    this.context?.cancel();
  }
}
