import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { type Metadata as GrpcMetadata, status as GrpcStatus } from '@grpc/grpc-js';
import type { CallContext } from 'nice-grpc';
import type { CallerContext } from './auth-middleware.js';
import { statusOfError } from './error-middleware.js';
import { authenticateLean, type CallSource, LeanCallContext, type LeanOptions, type RequestMetadata } from './lean-call.js';
import { callLog } from './logging-middleware.js';

/** A unary method's handler as the services write it for nice-grpc: the request, the call's context, the answer. */
export type UnaryHandler = (request: never, context: CallContext & CallerContext) => Promise<unknown>;

/** A method's wire format, as grpc-js registered it for the method. */
export interface RawMethod {
  readonly path: string;
  serialize(value: unknown): Buffer;
  deserialize(bytes: Buffer): unknown;
}

/** The response headers grpc-js sends before an answer. */
const RESPONSE_HEADERS: OutgoingHttpHeaders = {
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
};
/** The headers of an answer that is a status alone (trailers-only), as grpc-js sends it. */
const STATUS_ONLY_HEADERS: OutgoingHttpHeaders = { ':status': 200, 'content-type': 'application/grpc+proto' };
/** What grpc-js takes out of the request's headers before a handler sees them as metadata. */
const NOT_METADATA = new Set(['grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'accept-encoding', 'te', 'content-type']);

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
export class RawUnaryCall implements CallSource {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** The first frame's length, once its prefix has arrived. */
  private declared: number | undefined;
  private headersSent = false;
  private finished = false;
  private timer: NodeJS.Timeout | undefined;
  private context: LeanCallContext | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly headers: IncomingHttpHeaders,
    /** ms since the epoch; Infinity without a `grpc-timeout`. */
    private readonly deadline: number,
    private readonly method: RawMethod,
    private readonly handler: UnaryHandler,
    private readonly options: LeanOptions & { maxReceiveBytes: number },
  ) {
    if (Number.isFinite(deadline)) {
      this.timer = setTimeout(() => this.fail({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }), deadline - Date.now());
    }
    stream.on('data', (chunk: Buffer) => this.read(chunk));
    stream.once('end', () => this.answer());
    stream.once('close', () => this.closed());
  }

  getPeer(): string {
    const socket = this.stream.session?.socket;
    if (socket?.remoteAddress === undefined) return 'unknown';
    return socket.remotePort ? `${socket.remoteAddress}:${socket.remotePort}` : socket.remoteAddress;
  }

  getDeadline(): number {
    return this.deadline;
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
    const max = this.options.maxReceiveBytes;
    if (max !== -1 && this.declared > max) {
      this.fail({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: `Received message larger than max (${this.declared} vs ${max})` });
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
    const context = new LeanCallContext(this, new HeaderMetadata(this.headers));
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
    let message: Buffer;
    try {
      message = this.method.serialize(response);
    } catch {
      this.fail({ code: GrpcStatus.INTERNAL, details: 'Error serializing response' }, context);
      return;
    }
    this.finish();
    const frame = Buffer.allocUnsafe(message.length + 5);
    frame.writeUInt8(0, 0);
    frame.writeUInt32BE(message.length, 1);
    message.copy(frame, 5);
    this.sendHeaders(context.headers());
    const trailers = context.trailers();
    this.stream.once('wantTrailers', () => this.stream.sendTrailers(statusHeaders({ code: GrpcStatus.OK, details: 'OK' }, trailers)));
    this.stream.end(frame);
  }

  private fail(status: { code: number; details: string }, context = this.context): void {
    if (this.finished || this.gone()) return;
    this.finish();
    const headers = context?.headers() ?? null;
    const trailers = statusHeaders(status, context?.trailers() ?? null);
    if (!this.headersSent && headers === null) {
      // Trailers-only: the status in the one HEADERS frame.
      this.stream.respond({ ...trailers, ...STATUS_ONLY_HEADERS }, { endStream: true });
    } else {
      this.sendHeaders(headers);
      this.stream.once('wantTrailers', () => this.stream.sendTrailers(trailers));
      this.stream.end();
    }
    // Whatever the caller still sends is read and dropped.
    this.stream.resume();
  }

  private sendHeaders(metadata: GrpcMetadata | null): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.stream.respond(metadata === null ? RESPONSE_HEADERS : { ...RESPONSE_HEADERS, ...metadata.toHttp2Headers() }, { waitForTrailers: true });
  }

  /** Reset by the caller, or its connection gone: nothing more can be sent. */
  private gone(): boolean {
    return this.stream.closed || this.stream.destroyed;
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

function statusHeaders(status: { code: number; details: string }, trailers: GrpcMetadata | null): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { 'grpc-status': String(status.code), 'grpc-message': encodeURI(status.details) };
  return trailers === null ? headers : { ...headers, ...trailers.toHttp2Headers() };
}

/** The request's headers as metadata, read only as far as a handler asks, as grpc-js's Metadata.fromHttp2Headers reads them. */
class HeaderMetadata implements RequestMetadata {
  constructor(private readonly headers: IncomingHttpHeaders) {}

  get(key: string): Array<string | Buffer> {
    if (key.startsWith(':') || NOT_METADATA.has(key)) return [];
    const value = this.headers[key];
    if (value === undefined) return [];
    const values = Array.isArray(value) ? value : [value];
    if (!key.endsWith('-bin')) return values;
    return (Array.isArray(value) ? values : values[0]!.split(',')).map((part) => Buffer.from(part.trim(), 'base64'));
  }
}
