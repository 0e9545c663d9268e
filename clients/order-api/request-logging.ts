import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { refusedOnConnection } from './requests-per-connection.js';

/** Outcomes worth a line at info: an order created, a limiter's denial, a failure on our side. */
function notable(status: number): boolean {
  return status === 201 || status === 429 || status >= 500;
}

/**
 * Fastify's per-request log lines, scaled to what an operator reads: at info,
 * one `request completed` line per created order, 429 and 5xx; every other
 * request's `incoming request` and `request completed` lines are debug, and so
 * are those of the requests a connection's limit refused (that limit logs one
 * line per connection: requests-per-connection.ts). At
 * ORDER_API_LOG_LEVEL=debug each request gets both lines again. The request
 * fields are the logger's own summary (path without query string, no headers).
 */
export class OrderApiLogController extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const fields = { req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...fields, err: error }, 'request errored');
    else if (notable(reply.statusCode) && !refusedOnConnection(request)) reply.log.info(fields, 'request completed');
    else reply.log.debug(fields, 'request completed');
  }
}
