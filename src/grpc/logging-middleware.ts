import { ServerError, type CallContext, type ServerMiddlewareCall } from 'nice-grpc';
import type { Logger } from '../logger.js';

/** Fields of the current call's log lines; inner middleware (auth) may add to them. */
export interface CallLogContext {
  callLog?: Record<string, unknown>;
}

/**
 * One debug line when a call starts and one when it ends, with the fields an
 * operator can search by: method, policy id, request id, status. Identity
 * values and credentials are never logged: only the names of the
 * identity parts.
 */
export function loggingMiddleware(logger: Logger) {
  return async function* logCalls<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
    const log = callLog(logger, call.method.path, call.requestStream ? undefined : call.request);
    if (log === undefined) return yield* call.next(call.request, context);
    try {
      const response = yield* call.next(call.request, { ...context, callLog: log.fields } as CallContext);
      log.finished();
      return response;
    } catch (error) {
      log.failed(error instanceof ServerError ? error.code : undefined);
      throw error;
    }
  };
}

/** The debug lines of one call, started; undefined when debug lines are off (then a call costs nothing here). */
export interface CallLog {
  /** The fields of every line of this call; inner layers (auth) add to them. */
  readonly fields: Record<string, unknown>;
  finished(): void;
  failed(code: number | undefined): void;
}

/** Logs a call's start (a stream's requests are its messages: pass undefined) and answers how to log its end. */
export function callLog(logger: Logger, path: string, request: unknown): CallLog | undefined {
  if (!logger.isLevelEnabled('debug')) return undefined;
  // A stream's lines carry the method (and caller) only.
  const fields: Record<string, unknown> = { method: path, ...(request === undefined ? {} : requestFields(request)) };
  logger.debug(fields, 'call started');
  const started = performance.now();
  return {
    fields,
    finished: () => logger.debug({ ...fields, ms: elapsed(started) }, 'call finished'),
    failed: (code) => logger.debug({ ...fields, ms: elapsed(started), code }, 'call failed'),
  };
}

function requestFields(request: unknown): Record<string, unknown> {
  if (typeof request !== 'object' || request === null) return {};
  const { policy, requestId, identity } = request as { policy?: unknown; requestId?: unknown; identity?: unknown };
  return {
    ...(typeof policy === 'string' && policy !== '' ? { policy } : {}),
    ...(typeof requestId === 'string' && requestId !== '' ? { requestId } : {}),
    ...(typeof identity === 'object' && identity !== null ? { identityParts: Object.keys(identity) } : {}),
  };
}

const elapsed = (started: number) => Math.round((performance.now() - started) * 100) / 100;
