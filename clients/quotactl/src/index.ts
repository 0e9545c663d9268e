// quotactl, run in-process (README.md beside this package): the `quotactl` command is bin/quotactl.js.
export { runQuotactl } from './program.js';
export { EXIT, type ExitCode } from './exit-codes.js';
export type { CliIo, CliStream } from './io.js';
