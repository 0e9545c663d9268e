import { pino, stdSerializers, type DestinationStream, type Logger } from 'pino';

/** The parts of a Fastify request a request log line shows. */
interface LoggedRequest {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * The order API's logger. Request lines carry the method, the path without
 * its query string (a query string may carry credentials: ?api_key=...,
 * ?access_token=...) and the peer, never headers; errors never carry the raw
 * bytes of a request the HTTP parser refused. The app logs only the kind of
 * an authentication failure; the redaction is the second lock in case
 * someone logs a request's headers later.
 */
export function createOrderApiLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'order-api' },
      // Fastify prefers these to its own serializers of the same names.
      serializers: { req: requestSummary, err: errorSummary },
      redact: {
        paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', 'headers["x-api-key"]', 'authorization', 'apiKey', 'token'],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

function requestSummary(request: LoggedRequest) {
  const url = typeof request.url === 'string' ? request.url : '';
  const query = url.indexOf('?');
  return {
    method: request.method,
    url: query === -1 ? url : url.slice(0, query),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/** pino's error serializer without `rawPacket`: Node attaches the refused request's bytes, credentials and all. */
function errorSummary(error: Error) {
  const { rawPacket: _raw, ...summary } = stdSerializers.err(error) as ReturnType<typeof stdSerializers.err> & { rawPacket?: unknown };
  return summary;
}
