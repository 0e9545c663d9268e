import { Command, Option } from 'commander';
import { finiteNumber } from '../arg-parsers.js';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { describeIdentity, parseIdentity } from '../identity-args.js';
import { formatMs, formatNumber } from '../output.js';

interface AllowOptions {
  cost?: number;
  requestId?: string;
}

/** `quotactl allow POLICY part=value… [--cost N] [--request-id ID]`: one real decision; exit 0 allowed, 1 denied. */
export function allowCommand(ctx: CommandContext): Command {
  return new Command('allow')
    .summary('ask for a decision (spends quota when allowed)')
    .description('Ask the service for one decision, as a caller would: it spends COST (default 1) of POLICY for the identity when allowed.')
    .argument('<policy>', 'the policy to decide by')
    .argument('<part=value...>', 'the identity, e.g. user=42 tenant=acme')
    .addOption(new Option('--cost <n>', 'units to spend (0 or unset means 1)').argParser(finiteNumber))
    .option('--request-id <id>', 'idempotency key: a retry with the same id gets the first decision and spends nothing more')
    .addHelpText('after', '\nExit status: 0 allowed, 1 denied, 2 usage, 3 unreachable, 4 credentials refused, 5 request refused.')
    .action(async (policy: string, parts: string[], options: AllowOptions, command: Command) => {
      const identity = parseIdentity(parts);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const [{ toDecision }, { limitJson, limitsTable }] = await Promise.all([import('@quota-service/client'), import('../limits-view.js')]);
      const response = await ctx.withConnection(settings, (c) =>
        c.call((call) => c.client.allow({ policy, identity, cost: options.cost ?? 0, requestId: options.requestId ?? '' }, call)),
      );
      const decision = toDecision(response);
      if (printer.json) {
        printer.jsonLine({ policy, identity, ...decision, limits: decision.limits.map(limitJson) });
      } else {
        const { colors } = printer;
        const verdict = decision.allowed ? colors.green(colors.bold('allowed')) : colors.red(colors.bold('denied'));
        const details = [
          !decision.allowed && decision.deniedBy !== '' ? `by ${decision.deniedBy}` : '',
          !decision.allowed ? `retry in ${formatMs(decision.retryAfterMs)}` : '',
          decision.delayMs > 0 ? `wait ${formatMs(decision.delayMs)} first` : '',
          decision.source !== 'store' ? `(source: ${decision.source})` : '',
        ].filter((d) => d !== '');
        printer.line(
          `${verdict} ${policy} ${describeIdentity(identity)} cost ${formatNumber(options.cost || 1)}${details.length > 0 ? `: ${details.join(', ')}` : ''}`,
        );
        if (decision.limits.length > 0) printer.line(limitsTable(printer, decision.limits));
      }
      ctx.exit(decision.allowed ? EXIT.ok : EXIT.denied);
    });
}
