import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';

/** Largest request body read, in bytes (express.json's default 100 KB, stated). */
export const MAX_BODY_BYTES = 100 * 1024;

/** A JSON-RPC error answer: what every HTTP-level refusal looks like; `id` is the request's when it could be read. */
export function jsonRpcError(res: Response, status: number, code: number, message: string, id: string | number | null = null): void {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id });
}

/** The id to echo for a parsed body: a single request's string or number id, else null (a batch, a notification). */
export function requestIdOf(body: unknown): string | number | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  const { id } = body as { id?: unknown };
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** Unknown paths and methods: JSON, not Express's HTML page. */
export const notFound: RequestHandler = (_req, res) => jsonRpcError(res, 404, -32000, 'Not Found');

/**
 * The last handler: every error that reaches Express (body parsing, a throwing
 * middleware) is answered as a JSON-RPC error with a fixed message. The error
 * itself is never echoed: no stack, no file paths, whatever NODE_ENV says.
 * Client errors keep their status; anything else is logged and answered 500.
 */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    // Too late for an answer: Express ends the connection.
    if (res.headersSent) return next(error);
    const { status, type } = (error ?? {}) as { status?: unknown; type?: unknown };
    if (type === 'entity.parse.failed') return jsonRpcError(res, 400, -32700, 'Parse error');
    if (type === 'entity.too.large') {
      return jsonRpcError(res, 413, -32000, `Payload Too Large: Request body must not exceed ${MAX_BODY_BYTES} bytes`);
    }
    if (typeof status === 'number' && status >= 400 && status < 500) {
      return jsonRpcError(res, status, -32000, STATUS_CODES[status] ?? 'Bad Request');
    }
    logger.error({ err: error, method: req.method }, 'HTTP request failed');
    return jsonRpcError(res, 500, -32603, 'Internal error');
  };
}
