import { Command, Option } from 'commander';
import { humanDuration, positiveNumber, positiveWholeNumber } from '../arg-parsers.js';
import type { Connection } from '../connection.js';
import type { CommandContext } from '../context.js';
import { CliError, EXIT } from '../exit-codes.js';
import type { ParameterOptions } from '../override-args.js';
import { ALGORITHM_NAMES, type AlgorithmName, algorithmOf } from '../parameters-view.js';
import { overrideModules } from './override-modules.js';

interface SetOptions extends ParameterOptions {
  ttl?: number;
  reason?: string;
  exact?: boolean;
  algorithm?: AlgorithmName;
}

/**
 * The algorithm of the limit named `limit`, from the policies the service
 * lists to this token: an override's parameters are of its limit's algorithm.
 */
async function algorithmOfLimit(connection: Connection, limit: string): Promise<AlgorithmName> {
  const { policies } = await connection.call((call) => connection.client.listPolicies({}, call));
  for (const policy of policies) {
    const found = policy.limits.find((l) => l.name === limit);
    const algorithm = found === undefined ? 'unknown' : algorithmOf(found)[0];
    if (algorithm !== 'unknown') return algorithm;
  }
  throw new CliError(
    `LIMIT: no policy the service lists${connection.metadata.has('authorization') ? ' to this token' : ''} has a limit named ${JSON.stringify(limit)} (quotactl policies lists them; --algorithm names the algorithm of a limit it does not list)`,
    EXIT.rejected,
  );
}

const EXAMPLES = `
Parameters, by the limit's algorithm (those left out: the limit's default from the policy file):
  token_bucket, gcra        --capacity N  --refill-per-second R
  leaky_bucket              --capacity N  --leak-per-second R  --mode policing|shaping
  fixed_window, sliding_window_log, sliding_window_counter
                            --limit N (per the limit's own window)
  concurrency               --limit N (leases held at once)  --lease-ttl-ms MS

Examples:
  quotactl overrides set orders 42 --capacity 500 --refill-per-second 10 --ttl 2h --reason "ticket 1234"
  quotactl overrides set daily 'acme-*' --limit 10000 --ttl 7d`;

/** `quotactl overrides set LIMIT VALUE[*] <parameters> [--ttl 2h] [--reason TEXT]`: creates or replaces an override (admin). */
export function overrideSetCommand(ctx: CommandContext, valueHelp: string, exactHelp: string): Command {
  return new Command('set')
    .description(
      "Create or replace the override of LIMIT for one identity value (or a prefix: VALUE*): the parameters given replace the limit's plan or default ones; those left out are the limit's default ones from the policy file. Every replica applies it from its next decision.",
    )
    .argument('<limit>', 'the limit to override (a limit name from the policy file)')
    .argument('<value>', valueHelp)
    .addOption(new Option('--capacity <n>', 'token_bucket, gcra, leaky_bucket: the largest burst').argParser(positiveNumber))
    .addOption(new Option('--refill-per-second <r>', 'token_bucket, gcra: units added per second').argParser(positiveNumber))
    .addOption(new Option('--leak-per-second <r>', 'leaky_bucket: units that leak per second').argParser(positiveNumber))
    .addOption(new Option('--mode <mode>', 'leaky_bucket: policing or shaping').choices(['policing', 'shaping']))
    .addOption(
      new Option('--limit <n>', "windows: units per window (the window's length stays the limit's); concurrency: leases held at once").argParser(
        positiveWholeNumber,
      ),
    )
    .addOption(new Option('--lease-ttl-ms <ms>', 'concurrency: how long a lease lives unless renewed').argParser(positiveWholeNumber))
    .addOption(new Option('--ttl <duration>', 'how long it applies, e.g. 2h, 90m, 7d (default: until deleted)').argParser(humanDuration))
    .option('--reason <text>', 'why, e.g. a ticket reference: recorded and shown with the override')
    .option('--exact', exactHelp)
    .addOption(
      new Option('--algorithm <name>', "the limit's algorithm, when the token may not list its policy (default: looked up with ListPolicies)").choices(
        ALGORITHM_NAMES,
      ),
    )
    .addHelpText('after', EXAMPLES)
    .action(async (limit: string, value: string, options: SetOptions, command: Command) => {
      const [{ adminCall }, { limitParameters, overrideKey }, { describeOverride, overrideJson }] = await overrideModules();
      const key = overrideKey(limit, value, options.exact);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { current, previous } = await ctx.withConnection(settings, async (c) => {
        const parameters = limitParameters(limit, options.algorithm ?? (await algorithmOfLimit(c, limit)), options);
        return adminCall(c, (admin, call) => admin.setOverride({ key, parameters, ttlMs: options.ttl ?? 0, reason: options.reason ?? '' }, call));
      });
      if (current === undefined) throw new Error('SetOverride answered no override');
      if (printer.json) {
        printer.jsonLine({ override: overrideJson(current), previous: previous === undefined ? null : overrideJson(previous) });
      } else {
        printer.line(`${printer.colors.green('set')} ${describeOverride(printer, current)}`);
        if (previous !== undefined) printer.line(`replaced ${describeOverride(printer, previous)}`);
      }
      ctx.exit(EXIT.ok);
    });
}
