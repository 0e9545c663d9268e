import { writeSync } from 'node:fs';
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
    destination ?? stdoutLines(),
  );
}

/**
 * Stdout, written line by line as it is logged. Asynchronous writes would leave lines
 * buffered for pino's flush at exit, which retries a write to a closed pipe forever and
 * so keeps a stopping process alive whose log reader went away (a log shipper, `| head`).
 * Written at once, a closed stdout is found at the first line after it closed: from
 * then on lines are dropped, with one note on stderr, and logging never throws.
 */
function stdoutLines(): pino.DestinationStream {
  const stream = pino.destination({ dest: 1, sync: true });
  let failed = false;
  stream.on('error', (error: NodeJS.ErrnoException) => {
    stream.write = () => true;
    if (failed) return;
    failed = true;
    try {
      writeSync(2, `quota-service: stdout failed (${error.code ?? error.message}): log lines are dropped from now on\n`);
    } catch {
      // stderr is gone too: nobody is left to tell.
    }
  });
  return stream;
}
