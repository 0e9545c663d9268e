import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/** Outcomes worth a line at info: an order created, a limiter's denial, a failure on our side. */
function notable(status: number): boolean {
  return status === 201 || status === 429 || status >= 500;
}

/**
 * Fastify's per-request log lines, scaled to what an operator reads: at info,
 * one `request completed` line per created order, 429 and 5xx; every other
 * request's `incoming request` and `request completed` lines are debug. At
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
    else if (notable(reply.statusCode)) reply.log.info(fields, 'request completed');
    else reply.log.debug(fields, 'request completed');
  }
}
