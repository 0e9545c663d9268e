import { Metadata as GrpcMetadata, type ServerInterceptingCallInterface, type ServerInterceptor, status as GrpcStatus } from '@grpc/grpc-js';
import { type CallContext, Metadata } from 'nice-grpc';
import type { CallerRegistry } from '../config/callers.js';
import type { Logger } from '../logger.js';
import { authenticateCall, type CallerContext, isProtected } from './auth-middleware.js';
import { CALL_DEADLINE_KEY } from './call-deadline.js';
import { statusOfError } from './error-middleware.js';
import { callLog } from './logging-middleware.js';

/** A unary method's handler as the services write it for nice-grpc: the request, the call's context, the answer. */
export type UnaryHandler = (request: never, context: CallContext & CallerContext) => Promise<unknown>;

/** Unary handlers served on the lean path, by method path; filled in when the services are added. */
export type LeanRoutes = Map<string, UnaryHandler>;

/**
 * The lean path for the hot unary methods (Allow, ShouldRateLimit): a grpc-js
 * server interceptor that answers the call itself, with the same steps the
 * middleware chain takes (debug lines, caller authentication, error mapping)
 * as plain calls, instead of nice-grpc's per-call context, metadata copies
 * and one async generator per middleware. Every other method, and these when
 * the route is absent, go on through nice-grpc untouched. grpc-js still
 * reads, decodes (with the method's own strict decoder), times out and
 * encodes the call: TLS, deadlines, compression and status codes are its own.
 */
export function leanUnaryInterceptor(routes: LeanRoutes, options: { logger: Logger; callers?: CallerRegistry | undefined }): ServerInterceptor {
  return (method, call) => {
    const handler = routes.get(method.path);
    if (handler === undefined) return call as ServerInterceptingCall;
    // grpc-js types an interceptor's answer as its own class; it only uses the interface.
    return new LeanUnaryCall(call, method.path, handler, options) as unknown as ServerInterceptingCall;
  };
}

type ServerInterceptingCall = ReturnType<ServerInterceptor>;
type PartialStatusObject = Parameters<ServerInterceptingCallInterface['sendStatus']>[0];

/**
 * The call as grpc-js's own unary handling sees it: it starts it, and the
 * start is ignored (that handler never runs); this object reads the request
 * and answers on the call underneath. The rest passes through.
 */
class LeanUnaryCall implements ServerInterceptingCallInterface {
  private metadata: GrpcMetadata | undefined;
  private request: unknown;
  private received = false;
  private context: LeanCallContext | undefined;

  constructor(
    private readonly call: ServerInterceptingCallInterface,
    private readonly path: string,
    private readonly handler: UnaryHandler,
    private readonly options: { logger: Logger; callers?: CallerRegistry | undefined },
  ) {}

  start(): void {
    this.call.start({
      onReceiveMetadata: (metadata) => {
        this.metadata = metadata;
        this.call.startRead();
      },
      onReceiveMessage: (message) => {
        if (this.received) {
          this.call.sendStatus({ code: GrpcStatus.UNIMPLEMENTED, details: `Received a second request message for server streaming method ${this.path}` });
          return;
        }
        this.request = message;
        this.received = true;
        this.call.startRead();
      },
      onReceiveHalfClose: () => {
        if (!this.received) {
          this.call.sendStatus({ code: GrpcStatus.UNIMPLEMENTED, details: `Received no request message for server streaming method ${this.path}` });
          return;
        }
        this.answer();
      },
      onCancel: () => this.context?.cancel(),
    });
  }

  private answer(): void {
    const { logger, callers } = this.options;
    const log = callLog(logger, this.path, this.request);
    const context = new LeanCallContext(this.call, this.metadata!);
    this.context = context;
    let answered: Promise<unknown>;
    try {
      if (callers !== undefined && isProtected(this.path)) {
        const known = authenticateCall(callers, logger, this.path, context.metadata.get('authorization'), this.request, log?.fields);
        context.caller = known.caller;
        context.currentCaller = known.currentCaller;
      }
      answered = this.handler(this.request as never, context as unknown as CallContext & CallerContext);
    } catch (error) {
      answered = Promise.reject(error);
    }
    answered.then(
      (response) => {
        log?.finished();
        const headers = context.headers();
        if (headers !== null) this.call.sendMetadata(headers);
        this.call.sendMessage(response, () => this.call.sendStatus({ code: GrpcStatus.OK, details: 'OK', metadata: context.trailers() }));
      },
      (error: unknown) => {
        const failure = statusOfError(error, this.path, logger);
        log?.failed(failure.code);
        const headers = context.headers();
        if (headers !== null) this.call.sendMetadata(headers);
        this.call.sendStatus(statusOf(failure, context.trailers()));
      },
    );
  }

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

function statusOf(failure: { code: number; details: string }, metadata: GrpcMetadata | null): PartialStatusObject {
  return { code: failure.code as GrpcStatus, details: failure.details, metadata };
}

/**
 * What a handler reads of its call, as nice-grpc's CallContext offers it,
 * made only as far as it is read: the peer, the request's metadata (one entry
 * at a time, the caller's deadline under CALL_DEADLINE_KEY as the deadline
 * interceptor sets it), the trailer (admission's retry hint) and the
 * cancellation signal.
 */
class LeanCallContext {
  caller: CallerContext['caller'];
  currentCaller: CallerContext['currentCaller'];
  private peerAddress: string | undefined;
  private trailer_: Metadata | undefined;
  private header_: Metadata | undefined;
  private abort: AbortController | undefined;
  private cancelled = false;
  readonly metadata: { get(key: string): string | Uint8Array | undefined };

  constructor(
    private readonly call: ServerInterceptingCallInterface,
    metadata: GrpcMetadata,
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
function deadlineOf(call: ServerInterceptingCallInterface): string | undefined {
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) ? String(at) : undefined;
}

function toGrpcMetadata(metadata: Metadata): GrpcMetadata {
  const out = new GrpcMetadata();
  for (const [key, values] of metadata) for (const value of values) out.add(key, typeof value === 'string' ? value : Buffer.from(value));
  return out;
}
