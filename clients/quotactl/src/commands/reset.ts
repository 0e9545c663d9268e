import { Command } from 'commander';
import type { LimitStatus } from '@quota-service/contract';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { describeIdentity, parseIdentity } from '../identity-args.js';
import { formatNumber, type Printer } from '../output.js';

/** Each reset limit: what it had left before, and after (full). */
function resetTable(printer: Printer, before: readonly LimitStatus[], after: readonly LimitStatus[]): string {
  const rows = after.map((limit) => {
    const was = before.find((b) => b.name === limit.name);
    return [
      limit.name,
      limit.algorithm,
      was === undefined ? '' : formatNumber(was.remaining),
      printer.colors.green(formatNumber(limit.remaining)),
      formatNumber(limit.limit),
    ];
  });
  return printer.table(['limit', 'algorithm', 'remaining before', 'now', 'of'], rows, ['left', 'left', 'right', 'right', 'right']);
}

/** `quotactl reset POLICY part=value… [--limit NAME…]`: the identity's quota starts full again (admin). */
export function resetCommand(ctx: CommandContext): Command {
  return new Command('reset')
    .summary('give an identity a full quota again (admin)')
    .description(
      "Forget the identity's state under every limit of POLICY (or only the --limit ones): its next decision starts from a full quota. Overrides stay. Needs a token with the admin role.",
    )
    .argument('<policy>', 'the policy whose limits to reset')
    .argument('<part=value...>', 'the identity, e.g. user=42 tenant=acme')
    .option('--limit <name...>', 'only these limits of the policy (default: all of them)')
    .action(async (policy: string, parts: string[], options: { limit?: string[] }, command: Command) => {
      const identity = parseIdentity(parts);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const limits = options.limit ?? [];
      const [{ adminCall }, { limitJson }] = await Promise.all([import('../admin-call.js'), import('../limits-view.js')]);
      const { before, after } = await ctx.withConnection(settings, (c) => adminCall(c, (admin, call) => admin.resetQuota({ policy, identity, limits }, call)));
      if (printer.json) {
        printer.jsonLine({ policy, identity, before: before.map(limitJson), after: after.map(limitJson) });
      } else {
        printer.line(`${printer.colors.green('reset')} ${policy} ${describeIdentity(identity)}`);
        printer.line(resetTable(printer, before, after));
      }
      ctx.exit(EXIT.ok);
    });
}
