import type { LeanOptions } from './lean-call.js';
import { type BidiHandler, LeanStreamCall } from './lean-stream.js';
import type { RawCallLimits } from './raw-call.js';
import { RawStreamCall } from './raw-stream.js';
import type { StreamTaker } from './raw-streams.js';
import { RawUnaryCall, type UnaryHandler } from './raw-unary.js';

/** The handlers served on the lean path, by method path; filled in when the services are added. */
export class LeanRoutes {
  readonly unary = new Map<string, UnaryHandler>();
  readonly bidi = new Map<string, BidiHandler>();
}

/** grpc-js's limit on a request message when the server's options set none. */
const DEFAULT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
/** grpc-js's `grpc-timeout` grammar and units (ms per unit). */
const TIMEOUT = /(\d{1,8})\s*([HMSmun])/;
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/**
 * The lean path's methods (Allow, ShouldRateLimit, AllowStream): taken off
 * the HTTP/2 connection before grpc-js reads them (raw-streams.ts) and
 * answered by raw-unary.ts, or for the stream by raw-stream.ts and
 * lean-stream.ts, with the steps the middleware chain takes. A request it
 * would have to read differently is left to grpc-js and the middleware, which
 * answer it the same: a compressed one, one whose content type grpc-js
 * refuses, or one with a malformed timeout.
 */
export function leanTaker(routes: LeanRoutes, options: LeanOptions): StreamTaker {
  // The server's limit is known once it exists: read at its first call.
  let callOptions: (LeanOptions & RawCallLimits) | undefined;
  return (server, stream, headers) => {
    const path = headers[':path'];
    if (path === undefined) return false;
    const unary = routes.unary.get(path);
    const bidi = unary === undefined ? routes.bidi.get(path) : undefined;
    if (unary === undefined && bidi === undefined) return false;
    const contentType = headers['content-type'];
    if (contentType === undefined || !contentType.startsWith('application/grpc')) return false;
    const encoding = headers['grpc-encoding'];
    if (encoding !== undefined && encoding !== 'identity') return false;
    const deadline = deadlineOf(headers['grpc-timeout']);
    const method = server.handlers.get(path);
    if (deadline === undefined || method?.type !== (unary === undefined ? 'bidi' : 'unary')) return false;
    stream.once('error', ignoreStreamError);
    server.onStreamOpened(stream);
    const max = server.options['grpc.max_receive_message_length'];
    callOptions ??= { ...options, maxReceiveBytes: typeof max === 'number' ? max : DEFAULT_MAX_RECEIVE_BYTES };
    if (unary !== undefined) new RawUnaryCall(stream, headers, deadline, method, unary, callOptions);
    else new LeanStreamCall(new RawStreamCall(stream, headers, deadline, method, callOptions), path, bidi!, options).start();
    return true;
  };
}

/** A reset or a dropped connection: 'close' follows, and the call ends there. (One function for every stream: none made per call.) */
function ignoreStreamError(): void {}

/** The deadline (ms since the epoch) a `grpc-timeout` sets, Infinity without one, undefined when malformed. */
function deadlineOf(timeout: string | string[] | undefined): number | undefined {
  if (timeout === undefined) return Number.POSITIVE_INFINITY;
  const match = typeof timeout === 'string' ? TIMEOUT.exec(timeout) : null;
  if (match === null) return undefined;
  return Date.now() + ((Number(match[1]) * TIMEOUT_UNIT_MS[match[2]!]!) | 0);
}
