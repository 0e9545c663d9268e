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
    if (!logger.isLevelEnabled('debug')) return yield* call.next(call.request, context);
    // A stream's requests are its messages: its lines carry the method (and caller) only.
    const fields: Record<string, unknown> = { method: call.method.path, ...(call.requestStream ? {} : requestFields(call.request)) };
    logger.debug(fields, 'call started');
    const started = performance.now();
    try {
      const response = yield* call.next(call.request, { ...context, callLog: fields } as CallContext);
      logger.debug({ ...fields, ms: elapsed(started) }, 'call finished');
      return response;
    } catch (error) {
      const code = error instanceof ServerError ? error.code : undefined;
      logger.debug({ ...fields, ms: elapsed(started), code }, 'call failed');
      throw error;
    }
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
