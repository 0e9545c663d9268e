import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { type Metadata as GrpcMetadata, status as GrpcStatus } from '@grpc/grpc-js';
import type { CallSource, CallStatus, RequestMetadata } from './lean-call.js';

/** A method's wire format, as grpc-js registered it for the method. */
export interface RawMethod {
  readonly path: string;
  serialize(value: unknown): Buffer;
  deserialize(bytes: Buffer): unknown;
}

/** What a call on the lean path needs besides its stream: the server's limit on a request message (-1: none). */
export interface RawCallLimits {
  maxReceiveBytes: number;
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
 * A call on the lean path, read and answered on its own HTTP/2 stream
 * (raw-streams.ts hands it over), in the frames, headers and trailers
 * grpc-js sends: what a unary call (raw-unary.ts) and a stream
 * (raw-stream.ts) share.
 */
export abstract class RawCall implements CallSource {
  private headersSent = false;

  constructor(
    protected readonly stream: ServerHttp2Stream,
    protected readonly requestHeaders: IncomingHttpHeaders,
    /** ms since the epoch; Infinity without a `grpc-timeout`. */
    private readonly deadline: number,
    protected readonly method: RawMethod,
  ) {}

  getPeer(): string {
    const socket = this.stream.session?.socket;
    if (socket?.remoteAddress === undefined) return 'unknown';
    return socket.remotePort ? `${socket.remoteAddress}:${socket.remotePort}` : socket.remoteAddress;
  }

  getDeadline(): number {
    return this.deadline;
  }

  abstract sendMetadata(metadata: GrpcMetadata): void;

  /** The request's headers as the handler reads its metadata. */
  protected metadata(): RequestMetadata {
    return new HeaderMetadata(this.requestHeaders);
  }

  /** A timer that fires at the deadline, or undefined without one. */
  protected deadlineTimer(expired: () => void): NodeJS.Timeout | undefined {
    return Number.isFinite(this.deadline) ? setTimeout(expired, this.deadline - Date.now()) : undefined;
  }

  /** The response headers (with the handler's own, if any), once. */
  protected sendHeaders(metadata: GrpcMetadata | null): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.stream.respond(metadata === null ? RESPONSE_HEADERS : { ...RESPONSE_HEADERS, ...metadata.toHttp2Headers() }, { waitForTrailers: true });
  }

  /**
   * Ends the call with `status` (and the handler's trailer): in the trailers
   * behind what was sent, or, when nothing was, as the one HEADERS frame of a
   * trailers-only answer. `last` goes out as the final data frame.
   */
  protected sendStatusFrames(status: CallStatus, trailers: GrpcMetadata | null, last?: Buffer): void {
    const statusHeaders = statusHeadersOf(status, trailers);
    if (!this.headersSent && last === undefined) {
      this.headersSent = true;
      this.stream.respond({ ...statusHeaders, ...STATUS_ONLY_HEADERS }, { endStream: true });
      return;
    }
    this.sendHeaders(null);
    this.stream.once('wantTrailers', () => this.stream.sendTrailers(statusHeaders));
    if (last === undefined) this.stream.end();
    else this.stream.end(last);
  }

  /** An answer serialized by the method and framed; undefined when it does not serialize (answer NOT_SERIALIZED then). */
  protected frameOf(answer: unknown): Buffer | undefined {
    try {
      return framed(this.method.serialize(answer));
    } catch {
      return undefined;
    }
  }

  /** Reset by the caller, or its connection gone: nothing more can be sent. */
  protected gone(): boolean {
    return this.stream.closed || this.stream.destroyed;
  }
}

/** The status of an answer the method's serializer refused, as grpc-js words it. */
export const NOT_SERIALIZED: CallStatus = { code: GrpcStatus.INTERNAL, details: 'Error serializing response' };

/** A message in its gRPC frame: the compressed flag (never set), its length, the message. */
function framed(message: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(message.length + 5);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/** The refusal of a message declared longer than the server's limit, as grpc-js words it. */
export function tooLarge(declared: number, max: number): CallStatus | undefined {
  return max !== -1 && declared > max
    ? { code: GrpcStatus.RESOURCE_EXHAUSTED, details: `Received message larger than max (${declared} vs ${max})` }
    : undefined;
}

function statusHeadersOf(status: CallStatus, trailers: GrpcMetadata | null): OutgoingHttpHeaders {
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
