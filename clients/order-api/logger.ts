import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * The order API's logger. Fastify's request serializer logs no headers, and
 * the app logs only the kind of an authentication failure; the redaction is
 * the second lock in case someone logs a request's headers later.
 */
export function createOrderApiLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'order-api' },
      redact: {
        paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', 'headers["x-api-key"]', 'authorization', 'apiKey', 'token'],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
