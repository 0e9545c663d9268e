import { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { parseIdentity } from '../identity-args.js';
import { Printer } from '../output.js';
import { type GlobalOptions, resolveOutput } from '../settings.js';

/** `quotactl hash part=value…`: each value as the service's logs write it, to find a customer's lines. */
export function hashCommand(ctx: CommandContext): Command {
  return new Command('hash')
    .summary("an identity's values as the logs show them")
    .description(
      'Print each identity value as the service logs it (the first 16 hex digits of its SHA-256): denial lines and the admin audit carry ' +
        'these digests, never the values. Offline: nothing is sent.',
    )
    .argument('<part=value...>', 'the identity, e.g. user=42 tenant=acme')
    .addHelpText('after', '\nExample: quotactl hash user=alice   then look for "user":"<digest>" in the service\'s log.')
    .action(async (parts: string[], _options: unknown, command: Command) => {
      const identity = parseIdentity(parts);
      // Offline: only the output options matter.
      const printer = new Printer(ctx.io, resolveOutput(command.optsWithGlobals<GlobalOptions>(), ctx.io));
      const { identityDigests } = await import('@quota-service/core');
      const digests = identityDigests(identity);
      if (printer.json) printer.jsonLine({ identity: digests });
      else for (const [part, digest] of Object.entries(digests)) printer.line(`${part}=${digest}`);
      ctx.exit(EXIT.ok);
    });
}
