import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { EXIT, usageError } from '../exit-codes.js';
import { Printer } from '../output.js';
import { type GlobalOptions, resolveOutput } from '../settings.js';

/** What a check found: the policy names, or the loader's message. */
type Verdict = { valid: true; policies: string[] } | { valid: false; message: string };

async function checkOffline(text: string, file: string): Promise<Verdict> {
  const { parsePolicies, PolicyFileError } = await import('@quota-service/core');
  try {
    return { valid: true, policies: [...parsePolicies(text, file).keys()] };
  } catch (error) {
    if (!(error instanceof PolicyFileError)) throw error;
    return { valid: false, message: error.message };
  }
}

/**
 * `quotactl validate FILE [--remote]`: the policy file checked by the parser the
 * service loads it with, so the messages are the service's own: offline by
 * default, or by the running service (ValidatePolicies, admin) with --remote.
 * Exit 0 valid, 1 invalid.
 */
export function validateCommand(ctx: CommandContext): Command {
  return new Command('validate')
    .summary('check a policy file (offline, or by the service with --remote)')
    .description(
      'Check a policy file as the service would load it, without loading it: the same parser, the same messages. Offline by default; with --remote the running service checks it (its version of the rules; needs a token with the admin role). Exit 0 valid, 1 invalid.',
    )
    .argument('<file>', 'the policy file (YAML)')
    .option('--remote', 'ask the service to check it (ValidatePolicies) instead of checking here')
    .action(async (file: string, options: { remote?: boolean }, command: Command) => {
      let text: string;
      try {
        text = readFileSync(resolve(ctx.io.cwd, file), 'utf8');
      } catch (error) {
        throw usageError(`cannot read policy file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      }
      let printer: Printer;
      let verdict: Verdict;
      if (options.remote) {
        const settings = ctx.settings(command);
        printer = ctx.printer(settings);
        const { adminCall } = await import('../admin-call.js');
        const answer = await ctx.withConnection(settings, (c) => adminCall(c, (admin, call) => admin.validatePolicies({ text, source: file }, call)));
        verdict = answer.valid ? { valid: true, policies: answer.policies } : { valid: false, message: answer.message };
      } else {
        // Offline: only the output options matter, so a bad --ca or token setting does not stop a check.
        printer = new Printer(ctx.io, resolveOutput(command.optsWithGlobals<GlobalOptions>(), ctx.io));
        verdict = await checkOffline(text, file);
      }
      if (verdict.valid) {
        const names = verdict.policies;
        if (printer.json) printer.jsonLine({ file, valid: true, policies: names });
        else printer.line(`${printer.colors.green('valid')} ${file}: ${names.length} ${names.length === 1 ? 'policy' : 'policies'} (${names.join(', ')})`);
        ctx.exit(EXIT.ok);
      } else {
        if (printer.json) printer.jsonLine({ file, valid: false, error: verdict.message });
        else ctx.io.stderr.write(`${verdict.message}\n`);
        ctx.exit(EXIT.denied);
      }
    });
}
