import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { allowCommand } from './commands/allow.js';
import { benchCommand } from './commands/bench.js';
import { hashCommand } from './commands/hash.js';
import { healthCommand } from './commands/health.js';
import { peekCommand } from './commands/peek.js';
import { overridesCommand } from './commands/overrides.js';
import { policiesCommand } from './commands/policies.js';
import { resetCommand } from './commands/reset.js';
import { rlsCommand } from './commands/rls.js';
import { validateCommand } from './commands/validate.js';
import { watchCommand } from './commands/watch.js';
import { commandContext } from './context.js';
import { CliError, EXIT, type ExitCode } from './exit-codes.js';
import type { CliIo } from './io.js';
import { DEFAULT_ADDRESS, DEFAULT_TIMEOUT_MS, ENV } from './settings.js';
import { wholeNumber } from './arg-parsers.js';

/** src/ and dist/ both sit one level below the package root. */
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const ENV_HELP = `
Environment (an option given on the command line wins):
  ${ENV.addr}        --addr (default ${DEFAULT_ADDRESS})
  ${ENV.token}       --token (prefer it, or a token file, to --token: a command line is visible to other users of the machine)
  ${ENV.tokenFile}  --token-file
  ${ENV.tls}         --tls (1 or true)
  ${ENV.ca}          --ca
  ${ENV.cert}        --cert
  ${ENV.key}         --key
  ${ENV.timeout}  --timeout
  NO_COLOR             no colour (also when the output is not a terminal)

Exit status:
  0  allowed, or the command succeeded
  1  denied (allow), OVER_LIMIT (rls), NOT_SERVING (health), the policy file is invalid (validate), no such override (overrides get, delete)
  2  bad usage: unknown command or option, malformed argument, unreadable file
  3  the service could not be reached or did not answer in time
  4  the service refused the credentials (missing or unknown token, policy not allowed for it, no admin role)
  5  the service refused the request (unknown policy or limit, bad identity, cost or parameters; health: no service of that name)
  6  quotactl failed unexpectedly
  130  Ctrl-C stopped a call (watch and bench stop with their usual status)`;

/**
 * Runs quotactl with `argv` (the arguments after the program name) and
 * returns its exit status. Everything it prints goes to `io`; nothing here
 * reads process.* directly, so tests run it in-process.
 */
export async function runQuotactl(argv: readonly string[], io: CliIo): Promise<number> {
  let exit: ExitCode = EXIT.ok;
  const ctx = commandContext(io, (code) => {
    exit = code;
  });
  const program = new Command('quotactl')
    .description('Ask a quota decision service what it decides, what an identity has left, and how fast it answers.')
    .version(VERSION, '-V, --version')
    .addOption(new Option('--addr <host:port>', `the service's gRPC address (env ${ENV.addr}, default ${DEFAULT_ADDRESS})`))
    .addOption(new Option('--token <token>', `bearer token for a service with caller authentication (env ${ENV.token}); never printed`))
    .addOption(new Option('--token-file <file>', `read the bearer token from a file (env ${ENV.tokenFile})`))
    .addOption(new Option('--insecure', 'send the token without TLS to an address that is not loopback (anyone on the path can read it)'))
    .addOption(new Option('--tls', `connect with TLS, trusting the system's CAs (env ${ENV.tls})`))
    .addOption(new Option('--ca <file>', `connect with TLS, trusting this CA (PEM) (env ${ENV.ca})`))
    .addOption(new Option('--cert <file>', `client certificate (PEM) for mutual TLS; needs --key (env ${ENV.cert})`))
    .addOption(new Option('--key <file>', `the client certificate's private key (PEM) (env ${ENV.key})`))
    .addOption(
      new Option('--timeout <ms>', `give up on a call after this long (env ${ENV.timeout}, default ${DEFAULT_TIMEOUT_MS})`).argParser(wholeNumber(0xffff_ffff)),
    )
    .option('--json', 'print JSON (one document per line) for scripts')
    .option('--no-color', 'no colour, even on a terminal')
    .addHelpText('after', ENV_HELP)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    });
  // A command is a file in commands/ making a commander Command from the context; adding one is a line here.
  const configure = (command: Command): Command => {
    command.exitOverride().showHelpAfterError('(run with --help for usage)').configureOutput(program.configureOutput());
    for (const sub of command.commands) configure(sub);
    return command;
  };
  for (const make of [
    policiesCommand,
    allowCommand,
    peekCommand,
    resetCommand,
    overridesCommand,
    validateCommand,
    watchCommand,
    benchCommand,
    healthCommand,
    rlsCommand,
    hashCommand,
  ]) {
    program.addCommand(configure(make(ctx)));
  }
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exit;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end with exit code 0; any other is a usage error commander already printed.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof CliError) {
      io.stderr.write(`quotactl: ${error.message}\n`);
      return error.code;
    }
    io.stderr.write(`quotactl: unexpected failure: ${(error as Error)?.stack ?? String(error)}\n`);
    return EXIT.failed;
  }
}
