import type { CallOptions, ClientMiddlewareCall } from 'nice-grpc';

/**
 * Client middleware counting RPCs by method name (e.g. "Allow", "AllowBatch",
 * "AllowStream") and, for client-streaming methods, the messages sent on them.
 */
export function rpcCounter() {
  const calls = new Map<string, number>();
  const finished = new Map<string, number>();
  const messages = new Map<string, number>();
  const bump = (counts: Map<string, number>, name: string) => counts.set(name, (counts.get(name) ?? 0) + 1);
  async function* counted<T>(name: string, requests: AsyncIterable<T>) {
    for await (const request of requests) {
      bump(messages, name);
      yield request;
    }
  }
  async function* middleware<Request, Response>(call: ClientMiddlewareCall<Request, Response>, options: CallOptions) {
    const name = call.method.path.slice(call.method.path.lastIndexOf('/') + 1);
    bump(calls, name);
    try {
      if (call.requestStream) return yield* call.next(counted(name, call.request), options);
      return yield* call.next(call.request, options);
    } finally {
      bump(finished, name);
    }
  }
  return {
    middleware,
    count: (name: string) => calls.get(name) ?? 0,
    /** Calls of `name` that are over (answered, failed, or a stream that ended). */
    finished: (name: string) => finished.get(name) ?? 0,
    /** Messages sent on `name`'s streams (AllowStream: one per batch). */
    messages: (name: string) => messages.get(name) ?? 0,
    reset: () => {
      calls.clear();
      finished.clear();
      messages.clear();
    },
  };
}
