import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Any other method or path: the API's own JSON. Fastify's default 404 would
 * echo the URL, query string included, and log it.
 */
export async function notFound(_request: FastifyRequest, reply: FastifyReply) {
  return reply.code(404).send({ error: 'not_found', message: 'No such route: the API serves POST /api/orders.' });
}
