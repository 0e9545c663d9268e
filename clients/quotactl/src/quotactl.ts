#!/usr/bin/env node
// The quotactl command (README.md of this package): runs the program with this
// process's arguments, streams and environment, and exits with its status.
import { runQuotactl } from './program.js';

// Library deprecation notices are noise to a person at a terminal; grpc-js, for
// one, sets the TLS server name to the address even when it is an IP (DEP0123).
process.noDeprecation = true;

const interrupt = new AbortController();
// The first Ctrl-C asks watch and bench to stop and report; a second one ends the process at once.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupt.signal.aborted) process.exit(130);
    interrupt.abort();
  });
}

const code = await runQuotactl(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  interrupt: interrupt.signal,
});
// Let stdout drain (a pipe may be slow), then leave even if a channel or timer lingers.
process.stdout.write('', () => process.exit(code));
