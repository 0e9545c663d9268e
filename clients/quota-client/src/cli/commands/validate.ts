import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command } from 'commander';
import { parsePolicies, PolicyFileError } from '@quota-service/core';
import type { CommandContext } from '../context.js';
import { EXIT, usageError } from '../exit-codes.js';
import { Printer } from '../output.js';
import { type GlobalOptions, resolveOutput } from '../settings.js';

/**
 * `quotactl validate FILE`: the policy file checked offline by the parser the
 * service loads it with, so the messages are the service's own. Exit 0 valid, 1 invalid.
 */
export function validateCommand(ctx: CommandContext): Command {
  return new Command('validate')
    .summary('check a policy file offline')
    .description('Check a policy file as the service would load it, without a service: the same parser, the same messages. Exit 0 valid, 1 invalid.')
    .argument('<file>', 'the policy file (YAML)')
    .action((file: string, _options: object, command: Command) => {
      // Offline: only the output options matter, so a bad --ca or token setting does not stop a check.
      const printer = new Printer(ctx.io, resolveOutput(command.optsWithGlobals<GlobalOptions>(), ctx.io));
      let text: string;
      try {
        text = readFileSync(resolve(ctx.io.cwd, file), 'utf8');
      } catch (error) {
        throw usageError(`cannot read policy file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      }
      try {
        const policies = parsePolicies(text, file);
        const names = [...policies.keys()];
        if (printer.json) printer.jsonLine({ file, valid: true, policies: names });
        else printer.line(`${printer.colors.green('valid')} ${file}: ${names.length} ${names.length === 1 ? 'policy' : 'policies'} (${names.join(', ')})`);
        ctx.exit(EXIT.ok);
      } catch (error) {
        if (!(error instanceof PolicyFileError)) throw error;
        if (printer.json) printer.jsonLine({ file, valid: false, error: error.message });
        else ctx.io.stderr.write(`${error.message}\n`);
        ctx.exit(EXIT.denied);
      }
    });
}
