import type { CallOptions, ClientMiddlewareCall } from 'nice-grpc';

/** Client middleware counting RPCs by method name (e.g. "Allow", "AllowBatch"). */
export function rpcCounter() {
  const counts = new Map<string, number>();
  async function* middleware<Request, Response>(call: ClientMiddlewareCall<Request, Response>, options: CallOptions) {
    const name = call.method.path.slice(call.method.path.lastIndexOf('/') + 1);
    counts.set(name, (counts.get(name) ?? 0) + 1);
    return yield* call.next(call.request, options);
  }
  return { middleware, count: (name: string) => counts.get(name) ?? 0, reset: () => counts.clear() };
}
