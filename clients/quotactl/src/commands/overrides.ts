import { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { overrideModules } from './override-modules.js';
import { overrideSetCommand } from './override-set.js';

const VALUE_HELP = "the identity value (of the limit's key_by part), or a prefix followed by * for every value starting with it (e.g. acme-*)";
const EXACT_HELP = 'VALUE is exact even if it ends with * (a literal "*")';

/**
 * `quotactl overrides list|get|set|delete`: runtime overrides of a limit's
 * parameters for one identity value or a prefix of it (admin). Every replica
 * applies a change from its next decision.
 */
export function overridesCommand(ctx: CommandContext): Command {
  const overrides = new Command('overrides')
    .summary("change a limit's parameters for one identity or a prefix (admin)")
    .description(
      'Runtime overrides: other parameters for one limit and one identity value (exact), or every value starting with a prefix (VALUE*), optionally until they expire. They take precedence over plans and defaults, on every replica from its next decision. Needs a token with the admin role.',
    );

  overrides
    .command('list')
    .description('List the overrides in force (those not expired), sorted by limit, match and value.')
    .option('--limit <name>', 'only the overrides of this limit')
    .action(async (options: { limit?: string }, command: Command) => {
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const [{ adminCall }, { overrideJson, overridesTable }] = await Promise.all([import('../admin-call.js'), import('../override-view.js')]);
      const response = await ctx.withConnection(settings, (c) => adminCall(c, (admin, call) => admin.listOverrides({ limit: options.limit ?? '' }, call)));
      if (printer.json) printer.jsonLine({ overrides: response.overrides.map(overrideJson) });
      else if (response.overrides.length === 0 && printer.tty) printer.line('no overrides in force');
      else printer.line(overridesTable(printer, response.overrides));
      ctx.exit(EXIT.ok);
    });

  overrides
    .command('get')
    .description('Show one override. Exit 1 when there is none (or it has expired).')
    .argument('<limit>', 'the limit it overrides')
    .argument('<value>', VALUE_HELP)
    .option('--exact', EXACT_HELP)
    .action(async (limit: string, value: string, options: { exact?: boolean }, command: Command) => {
      const [{ adminCall }, { overrideKey }, { describeOverride, overrideJson }] = await overrideModules();
      const key = overrideKey(limit, value, options.exact);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { current } = await ctx.withConnection(settings, (c) => adminCall(c, (admin, call) => admin.getOverride({ key }, call), EXIT.denied));
      if (current === undefined) throw new Error('GetOverride answered no override');
      if (printer.json) printer.jsonLine({ override: overrideJson(current) });
      else printer.line(describeOverride(printer, current));
      ctx.exit(EXIT.ok);
    });

  overrides.addCommand(overrideSetCommand(ctx, VALUE_HELP, EXACT_HELP));

  overrides
    .command('delete')
    .description('Remove one override: every replica goes back to the plan or default parameters from its next decision. Exit 1 when there was none.')
    .argument('<limit>', 'the limit it overrides')
    .argument('<value>', VALUE_HELP)
    .option('--exact', EXACT_HELP)
    .action(async (limit: string, value: string, options: { exact?: boolean }, command: Command) => {
      const [{ adminCall }, { overrideKey }, { describeOverride, overrideJson }] = await overrideModules();
      const key = overrideKey(limit, value, options.exact);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { previous } = await ctx.withConnection(settings, (c) => adminCall(c, (admin, call) => admin.deleteOverride({ key }, call), EXIT.denied));
      if (printer.json) printer.jsonLine({ deleted: previous === undefined ? null : overrideJson(previous) });
      else printer.line(`${printer.colors.green('deleted')}${previous === undefined ? '' : ` ${describeOverride(printer, previous)}`}`);
      ctx.exit(EXIT.ok);
    });

  return overrides;
}
