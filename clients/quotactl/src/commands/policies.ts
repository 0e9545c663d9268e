import { Command } from 'commander';
import type { Policy } from '@quota-service/contract';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { formatNumber } from '../output.js';
import { algorithmOf, describeParameters } from '../parameters-view.js';

const policyJson = (policy: Policy) => ({
  name: policy.name,
  description: policy.description,
  failureMode: policy.failureMode?.mode ?? '',
  ...(policy.failureMode?.mode === 'local' && { localShare: policy.failureMode.localShare }),
  limits: policy.limits.map((limit) => {
    const [algorithm, parameters] = algorithmOf(limit);
    const plans = limit.plans.map((plan) => ({ name: plan.name, ...algorithmOf(plan.parameters ?? {})[1] }));
    return { name: limit.name, keyBy: limit.keyBy, algorithm, ...parameters, ...(limit.planBy !== '' && { planBy: limit.planBy, plans }) };
  }),
});

/** `quotactl policies`: the policies the service enforces (those the token may use). */
export function policiesCommand(ctx: CommandContext): Command {
  return new Command('policies')
    .summary('list the policies the service enforces')
    .description("List the policies the service enforces, with their limits and each limit's plans. With a token, only the policies that token may use.")
    .action(async (_options: object, command: Command) => {
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { policies } = await ctx.withConnection(settings, (c) => c.call((call) => c.client.listPolicies({}, call)));
      if (printer.json) {
        printer.jsonLine({ policies: policies.map(policyJson) });
      } else {
        const rows = policies.flatMap((policy) =>
          policy.limits.flatMap((limit, i) => {
            const [algorithm, parameters] = algorithmOf(limit);
            const failure = policy.failureMode?.mode === 'local' ? `local ${formatNumber(policy.failureMode.localShare)}` : (policy.failureMode?.mode ?? '');
            // A limit with plans: its default, then one row per plan (`plan=pro`, by its plan_by part).
            const plans = limit.plans.map((plan) => {
              const [planAlgorithm, planParameters] = algorithmOf(plan.parameters ?? {});
              return ['', '', `${limit.planBy}=${plan.name}`, '', describeParameters(planAlgorithm, planParameters), ''];
            });
            return [
              [
                i === 0 ? printer.colors.bold(policy.name) : '',
                limit.name,
                limit.keyBy,
                algorithm,
                `${describeParameters(algorithm, parameters)}${plans.length > 0 ? ' (default)' : ''}`,
                i === 0 ? failure : '',
              ],
              ...plans,
            ];
          }),
        );
        printer.line(printer.table(['policy', 'limit', 'key by', 'algorithm', 'parameters', 'on store failure'], rows));
      }
      ctx.exit(EXIT.ok);
    });
}
