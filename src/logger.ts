import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The one logger factory: JSON lines on stdout, child loggers per component.
 * Credentials never reach a log line: request fields that could
 * carry them are redacted here, once, whatever the caller passes.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'quota-service' },
      redact: { paths: ['authorization', '*.authorization', 'token', '*.token', 'apiKey', '*.apiKey'], censor: '[redacted]' },
    },
    destination,
  );
}
