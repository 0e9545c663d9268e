import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { invalidInputBody } from '@quota-service/http';

/**
 * Any other method or path: the API's own JSON. Fastify's default 404 would
 * echo the URL, query string included, and log it.
 */
export async function notFound(_request: FastifyRequest, reply: FastifyReply) {
  return reply.code(404).send({ error: 'not_found', message: 'No such route: the API serves POST /api/orders and GET /api/orders/<id>.' });
}

/**
 * Errors that reach Fastify's error handler, as the API's own JSON:
 * - input the quota service refused: 400 invalid_request naming the field;
 * - a request Fastify could not read (body not JSON, unsupported
 *   Content-Type, body too large): its 4xx with Fastify's message, which
 *   describes the request, not the server;
 * - anything else: logged, and a 500 that says nothing of what failed.
 */
export async function errorReply(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const invalid = invalidInputBody(error);
  if (invalid !== undefined) return reply.code(400).send(invalid);
  const status = error.statusCode;
  if (status !== undefined && status >= 400 && status < 500 && error.code?.startsWith('FST_')) {
    return reply.code(status).send({ error: 'invalid_request', message: error.message });
  }
  request.log.error({ err: error }, 'request failed');
  return reply.code(500).send({ error: 'internal_error', message: 'The request failed on our side; try again later.' });
}
