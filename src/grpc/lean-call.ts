import { Metadata as GrpcMetadata } from '@grpc/grpc-js';
import { Metadata } from 'nice-grpc';
import type { CallerRegistry } from '../config/callers.js';
import type { Logger } from '../logger.js';
import { authenticateCall, type CallerContext, isProtected } from './auth-middleware.js';
import { CALL_DEADLINE_KEY } from './call-deadline.js';
import type { CallLog } from './logging-middleware.js';

/** What the lean calls (raw-unary.ts, lean-stream.ts) are given besides their handler. */
export interface LeanOptions {
  logger: Logger;
  callers?: CallerRegistry | undefined;
}

/**
 * The caller authentication the auth middleware does, for a call on the lean
 * path (`request` undefined for a stream): sets the caller on `context`, or
 * throws the ServerError to answer.
 */
export function authenticateLean(options: LeanOptions, path: string, context: LeanCallContext, request: unknown, log: CallLog | undefined): void {
  if (options.callers === undefined || !isProtected(path)) return;
  const known = authenticateCall(options.callers, options.logger, path, context.metadata.get('authorization'), request, log?.fields);
  context.caller = known.caller;
  context.currentCaller = known.currentCaller;
}

/** How a call ended: a gRPC status code and its message. */
export interface CallStatus {
  code: number;
  details: string;
}

/** What a call context reads of the call underneath, a call on its HTTP/2 stream (raw-call.ts). */
export interface CallSource {
  getPeer(): string;
  /** ms since the epoch; Infinity without a deadline. */
  getDeadline(): number;
  sendMetadata(metadata: GrpcMetadata): void;
}

/** What a stream's call hands its reader, as grpc-js's server call listener gets it. */
export interface StreamListener {
  onReceiveMetadata(metadata: RequestMetadata): void;
  /** One message per startRead. */
  onReceiveMessage(message: unknown): void;
  /** The caller sent its last message (after every message it sent). */
  onReceiveHalfClose(): void;
  /** The call is over (the caller gone, its deadline passed, or its status sent): nothing more is read or written. */
  onCancel(): void;
}

/** A streaming call underneath a lean stream (raw-stream.ts): read one message at a time, answered message by message, then a status. */
export interface StreamSource extends CallSource {
  start(listener: StreamListener): void;
  startRead(): void;
  /** `written` runs once the message is handed to the connection. */
  sendMessage(message: unknown, written: () => void): void;
  /** Ends the call with `status`, and the handler's trailer when it set one. */
  sendStatus(status: CallStatus, trailers: GrpcMetadata | null): void;
}

/** The request's metadata, one key at a time, as grpc-js's Metadata answers `get`. */
export interface RequestMetadata {
  get(key: string): Array<string | Buffer>;
}

/**
 * What a handler reads of its call, as nice-grpc's CallContext offers it,
 * made only as far as it is read: the peer, the request's metadata (one entry
 * at a time, the caller's deadline under CALL_DEADLINE_KEY as the deadline
 * interceptor sets it), the trailer (admission's retry hint) and the
 * cancellation signal.
 */
export class LeanCallContext {
  caller: CallerContext['caller'];
  currentCaller: CallerContext['currentCaller'];
  private peerAddress: string | undefined;
  private trailer_: Metadata | undefined;
  private header_: Metadata | undefined;
  private abort: AbortController | undefined;
  private cancelled = false;
  readonly metadata: { get(key: string): string | Uint8Array | undefined };

  constructor(
    private readonly call: CallSource,
    metadata: RequestMetadata,
  ) {
    this.metadata = {
      get: (key) => {
        if (key === CALL_DEADLINE_KEY) return deadlineOf(call);
        const value = metadata.get(key)[0];
        return typeof value === 'string' ? value : value === undefined ? undefined : new Uint8Array(value);
      },
    };
  }

  get peer(): string {
    this.peerAddress ??= this.call.getPeer();
    return this.peerAddress;
  }

  get trailer(): Metadata {
    this.trailer_ ??= Metadata();
    return this.trailer_;
  }

  get header(): Metadata {
    this.header_ ??= Metadata();
    return this.header_;
  }

  get signal(): AbortSignal {
    this.abort ??= new AbortController();
    if (this.cancelled) this.abort.abort();
    return this.abort.signal;
  }

  sendHeader(): void {
    const headers = this.headers();
    this.header_ = undefined;
    if (headers !== null) this.call.sendMetadata(headers);
  }

  cancel(): void {
    this.cancelled = true;
    this.abort?.abort();
  }

  /** The trailer as grpc-js sends it, or null when no handler set one. */
  trailers(): GrpcMetadata | null {
    return this.trailer_ === undefined ? null : toGrpcMetadata(this.trailer_);
  }

  /** The header a handler set, or null: sent just before the answer, as nice-grpc sends it. */
  headers(): GrpcMetadata | null {
    return this.header_ === undefined || [...this.header_].length === 0 ? null : toGrpcMetadata(this.header_);
  }
}

/** The caller's deadline as the deadline interceptor writes it (ms since the epoch, as text), or undefined without one. */
function deadlineOf(call: CallSource): string | undefined {
  const at = call.getDeadline();
  return Number.isFinite(at) ? String(at) : undefined;
}

function toGrpcMetadata(metadata: Metadata): GrpcMetadata {
  const out = new GrpcMetadata();
  for (const [key, values] of metadata) for (const value of values) out.add(key, typeof value === 'string' ? value : Buffer.from(value));
  return out;
}
