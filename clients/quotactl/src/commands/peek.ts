import { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { describeIdentity, parseIdentity } from '../identity-args.js';

/** `quotactl peek POLICY part=value…`: what the identity has left (GetQuota), spending nothing. */
export function peekCommand(ctx: CommandContext): Command {
  return new Command('peek')
    .summary('show what an identity has left, spending nothing')
    .description("Show every limit of POLICY for the identity: what remains and when it resets. Spends nothing (the service's GetQuota).")
    .argument('<policy>', 'the policy whose limits to show')
    .argument('<part=value...>', 'the identity, e.g. user=42 tenant=acme')
    .action(async (policy: string, parts: string[], _options: object, command: Command) => {
      const identity = parseIdentity(parts);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { limitJson, limitsTable } = await import('../limits-view.js');
      const response = await ctx.withConnection(settings, (c) => c.call((call) => c.client.getQuota({ policy, identity }, call)));
      if (printer.json) {
        printer.jsonLine({ policy, identity, limits: response.limits.map(limitJson) });
      } else {
        printer.line(`${printer.colors.bold(policy)} ${describeIdentity(identity)}`);
        printer.line(limitsTable(printer, response.limits));
      }
      ctx.exit(EXIT.ok);
    });
}
