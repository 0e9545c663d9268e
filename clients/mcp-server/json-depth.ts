import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { jsonRpcError, requestIdOf } from './http-errors.js';

/**
 * Deepest nesting of arrays and objects accepted in a request body: the message
 * itself takes three levels (message, params, arguments), which leaves tool
 * arguments far more than any schema needs. Deeper bodies are refused before the
 * SDK sees them: its recursive steps (serializing, validating) would exhaust the
 * stack on a few thousand levels, which fit in the body size limit.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `value` nests arrays and objects deeper than `max` levels. Iterative, so a deep value cannot exhaust the stack here. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const pending: [unknown, number][] = [[value, 1]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, depth] = next;
    if (node === null || typeof node !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') pending.push([child, depth + 1]);
    }
  }
  return false;
}

/** Refuses a parsed body nested deeper than MAX_JSON_DEPTH: 400 with a JSON-RPC error, logged in one line. */
export function jsonDepthLimit(logger: Logger): RequestHandler {
  return (req, res, next) => {
    if (!nestsDeeperThan(req.body, MAX_JSON_DEPTH)) return next();
    logger.info({ maxDepth: MAX_JSON_DEPTH }, 'MCP request refused: body nested too deep');
    return jsonRpcError(res, 400, -32600, `Bad Request: the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`, requestIdOf(req.body));
  };
}
