import { setLogger } from '@grpc/grpc-js';
import type { Logger } from '../logger.js';

/**
 * grpc-js's own log lines (plain text on stderr, "E ..." by default) as JSON
 * lines of the service's logger. Its verbosity stays its own (GRPC_VERBOSITY,
 * errors only by default). A failed bind is logged by grpc-js and then thrown:
 * the service reports it once, naming its variable (src/listen-error.ts), so
 * grpc-js's line about it goes to debug.
 */
export function routeGrpcLogs(logger: Logger): void {
  const line =
    (level: 'error' | 'info' | 'debug') =>
    (message?: unknown, ...rest: unknown[]) => {
      const text = [message, ...rest].map(String).join(' ');
      logger[level === 'error' && /^No address added out of total/.test(text) ? 'debug' : level](text);
    };
  setLogger({ error: line('error'), info: line('info'), debug: line('debug') });
}
