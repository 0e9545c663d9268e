import { status as GrpcStatus, type Metadata as GrpcMetadata } from '@grpc/grpc-js';
import type { CallContext } from 'nice-grpc';
import type { CallerContext } from './auth-middleware.js';
import { statusOfError } from './error-middleware.js';
import { authenticateLean, LeanCall, LeanCallContext, type LeanOptions, statusOf } from './lean-call.js';
import { callLog } from './logging-middleware.js';

/** A unary method's handler as the services write it for nice-grpc: the request, the call's context, the answer. */
export type UnaryHandler = (request: never, context: CallContext & CallerContext) => Promise<unknown>;

/**
 * A unary call on the lean path (lean-path.ts): reads the one request, then
 * answers it with the same steps the middleware chain takes (debug lines,
 * caller authentication, error mapping) as plain calls.
 */
export class LeanUnaryCall extends LeanCall {
  private metadata: GrpcMetadata | undefined;
  private request: unknown;
  private received = false;
  private context: LeanCallContext | undefined;

  constructor(
    call: ConstructorParameters<typeof LeanCall>[0],
    private readonly path: string,
    private readonly handler: UnaryHandler,
    private readonly options: LeanOptions,
  ) {
    super(call);
  }

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
    const { logger } = this.options;
    const log = callLog(logger, this.path, this.request);
    const context = new LeanCallContext(this.call, this.metadata!);
    this.context = context;
    let answered: Promise<unknown>;
    try {
      authenticateLean(this.options, this.path, context, this.request, log);
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
}
