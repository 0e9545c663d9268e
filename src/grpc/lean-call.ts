import { Metadata as GrpcMetadata, type ServerInterceptingCallInterface, type ServerInterceptor, type status as GrpcStatus } from '@grpc/grpc-js';
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

export type ServerInterceptingCall = ReturnType<ServerInterceptor>;
type PartialStatusObject = Parameters<ServerInterceptingCallInterface['sendStatus']>[0];

/**
 * A call on the lean path, as grpc-js's own handling sees it: grpc-js starts
 * it, and the start is ignored (grpc-js's handler never runs); the subclass
 * reads the requests and answers on the call underneath. The rest passes through.
 */
export abstract class LeanCall implements ServerInterceptingCallInterface {
  constructor(protected readonly call: ServerInterceptingCallInterface) {}

  abstract start(): void;

  sendMetadata(metadata: GrpcMetadata): void {
    this.call.sendMetadata(metadata);
  }
  sendMessage(message: unknown, callback: () => void): void {
    this.call.sendMessage(message, callback);
  }
  sendStatus(status: PartialStatusObject): void {
    this.call.sendStatus(status);
  }
  startRead(): void {
    this.call.startRead();
  }
  getPeer() {
    return this.call.getPeer();
  }
  getDeadline() {
    return this.call.getDeadline();
  }
  getHost() {
    return this.call.getHost();
  }
  getAuthContext() {
    return this.call.getAuthContext();
  }
  getConnectionInfo() {
    return this.call.getConnectionInfo();
  }
  getMetricsRecorder() {
    return this.call.getMetricsRecorder();
  }
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

export function statusOf(failure: { code: number; details: string }, metadata: GrpcMetadata | null): PartialStatusObject {
  return { code: failure.code as GrpcStatus, details: failure.details, metadata };
}

/** What a call context reads of the call underneath: grpc-js's intercepting call, or a call on its HTTP/2 stream (raw-unary.ts). */
export interface CallSource {
  getPeer(): string;
  getDeadline(): ReturnType<ServerInterceptingCallInterface['getDeadline']>;
  sendMetadata(metadata: GrpcMetadata): void;
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
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) ? String(at) : undefined;
}

function toGrpcMetadata(metadata: Metadata): GrpcMetadata {
  const out = new GrpcMetadata();
  for (const [key, values] of metadata) for (const value of values) out.add(key, typeof value === 'string' ? value : Buffer.from(value));
  return out;
}
