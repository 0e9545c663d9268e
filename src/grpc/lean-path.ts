import type { ServerInterceptor } from '@grpc/grpc-js';
import type { LeanOptions, ServerInterceptingCall } from './lean-call.js';
import { type BidiHandler, LeanStreamCall } from './lean-stream.js';
import { LeanUnaryCall, type UnaryHandler } from './lean-unary.js';

/** The handlers served on the lean path, by method path; filled in when the services are added. */
export class LeanRoutes {
  readonly unary = new Map<string, UnaryHandler>();
  readonly bidi = new Map<string, BidiHandler>();

  has(path: string): boolean {
    return this.unary.has(path) || this.bidi.has(path);
  }
}

/**
 * The lean path for the hot methods (Allow, ShouldRateLimit, AllowStream): a
 * grpc-js server interceptor that answers the call itself (lean-unary.ts,
 * lean-stream.ts), with the same steps the middleware chain takes as plain
 * calls, instead of nice-grpc's per-call context, metadata copies and one
 * async generator per middleware. Every other method, and these when the
 * route is absent, go on through nice-grpc untouched. grpc-js still reads,
 * decodes (with the method's own strict decoder), times out and encodes the
 * call: TLS, deadlines, compression, flow control and status codes are its own.
 */
export function leanInterceptor(routes: LeanRoutes, options: LeanOptions): ServerInterceptor {
  return (method, call) => {
    // grpc-js types an interceptor's answer as its own class; it only uses the interface.
    const unary = routes.unary.get(method.path);
    if (unary !== undefined) return new LeanUnaryCall(call, method.path, unary, options) as unknown as ServerInterceptingCall;
    const bidi = routes.bidi.get(method.path);
    if (bidi !== undefined) return new LeanStreamCall(call, method.path, bidi, options) as unknown as ServerInterceptingCall;
    return call as ServerInterceptingCall;
  };
}
