import { type Metadata, ServerInterceptingCall, type ServerInterceptor } from '@grpc/grpc-js';

/**
 * The metadata entry that carries a call's deadline to its handler: the time
 * (ms since the Unix epoch, this process's clock) by which the caller stops
 * waiting, from the `grpc-timeout` the caller sent. grpc-js reads and removes
 * `grpc-timeout` before a handler sees the metadata; this entry is written
 * by the server itself (a caller's own entry of this name is dropped).
 */
export const CALL_DEADLINE_KEY = 'x-quota-call-deadline';

/**
 * A grpc-js server interceptor that hands the caller's deadline to the
 * handlers of `paths` (callDeadlineOf); other methods pass untouched, at no
 * cost. (The lean path, lean-path.ts, reads the deadline off the call itself:
 * its calls never reach grpc-js's interceptors.)
 */
export function callDeadlineInterceptor(paths: readonly string[]): ServerInterceptor {
  const wanted = new Set(paths);
  return (method, call) => {
    // grpc-js needs only the interface of the call it is given back: no wrapper for the other methods.
    if (!wanted.has(method.path)) return call as ServerInterceptingCall;
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata: Metadata, pass: (metadata: Metadata) => void) => {
            metadata.remove(CALL_DEADLINE_KEY);
            const deadline = call.getDeadline();
            const at = deadline instanceof Date ? deadline.getTime() : deadline;
            if (Number.isFinite(at)) metadata.set(CALL_DEADLINE_KEY, String(at));
            pass(metadata);
          },
        }),
    });
  };
}

/** The caller's deadline (ms since the Unix epoch) from a handler's metadata, or undefined when it sent none. */
export function callDeadlineOf(metadata: { get(key: string): unknown }): number | undefined {
  const value = metadata.get(CALL_DEADLINE_KEY);
  if (typeof value !== 'string') return undefined;
  const at = Number(value);
  return Number.isFinite(at) ? at : undefined;
}
