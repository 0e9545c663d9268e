import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { Server as GrpcServer } from '@grpc/grpc-js';

/** What a taker reads of the grpc-js server a stream came to. */
export interface StreamServer {
  /** The options the server was made with. */
  readonly options: Readonly<Record<string, unknown>>;
  /** The methods added to the server, by path, with their wire format. */
  readonly handlers: ReadonlyMap<string, { type: string; path: string; serialize(value: unknown): Buffer; deserialize(bytes: Buffer): unknown }>;
  /** Counts the stream toward the connection's activity (its idle timeout). */
  onStreamOpened(stream: ServerHttp2Stream): void;
}

/** Takes one incoming HTTP/2 stream and answers it, or declines (false) and grpc-js serves it. */
export type StreamTaker = (server: StreamServer, stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean;

type StreamHandler = (this: StreamServer, extraInterceptors: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

/** grpc-js's two handlers of a new stream (with and without channelz); one of them is bound to every HTTP/2 server it listens on. */
const STREAM_HANDLERS = ['_streamHandler', '_channelzHandler'] as const;

/** The taker of each server, by the options object the server was made with. */
const takers = new WeakMap<object, StreamTaker>();
let hooked: boolean | undefined;

/**
 * Lets `taker` see every stream that reaches the grpc-js server made with
 * `serverOptions` (nice-grpc makes the server when it listens, from these
 * options), before grpc-js reads it: the taker answers the hot methods on the
 * stream itself; every other stream, and any it declines, grpc-js serves as
 * ever, on the same connections, with the same TLS, keepalive, connection
 * limits and shutdown. grpc-js has no public hook for this: its stream
 * handler is wrapped, once per process, and only for servers that registered
 * a taker. False when this grpc-js has no such handler (grpc-js then serves
 * every stream). grpc-js's channelz call counters do not count the calls a
 * taker answers (nothing here serves channelz).
 */
export function takeStreams(serverOptions: object, taker: StreamTaker): boolean {
  hooked ??= hookGrpcJs();
  if (hooked) takers.set(serverOptions, taker);
  return hooked;
}

function hookGrpcJs(): boolean {
  const prototype = GrpcServer.prototype as unknown as Record<string, unknown>;
  const originals = STREAM_HANDLERS.map((name) => prototype[name]);
  if (typeof prototype['onStreamOpened'] !== 'function' || originals.some((handler) => typeof handler !== 'function')) return false;
  STREAM_HANDLERS.forEach((name, index) => {
    const original = originals[index] as StreamHandler;
    prototype[name] = function (this: StreamServer, extraInterceptors: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
      const taker = takers.get(this.options);
      if (taker === undefined || !taker(this, stream, headers)) original.call(this, extraInterceptors, stream, headers);
    } satisfies StreamHandler;
  });
  return true;
}
