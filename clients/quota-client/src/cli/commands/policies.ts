import { Command } from 'commander';
import type { LimitDefinition, Policy } from '@quota-service/contract';
import type { CommandContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { formatNumber } from '../output.js';

/** A limit definition's algorithm and parameters, from the contract's oneof, e.g. ["token_bucket", {capacity: 10, refillPerSecond: 2}]. */
function algorithmOf(limit: LimitDefinition): [string, Record<string, number | string>] {
  if (limit.tokenBucket) return ['token_bucket', { ...limit.tokenBucket }];
  if (limit.fixedWindow) return ['fixed_window', { ...limit.fixedWindow }];
  if (limit.slidingWindowLog) return ['sliding_window_log', { ...limit.slidingWindowLog }];
  if (limit.slidingWindowCounter) return ['sliding_window_counter', { ...limit.slidingWindowCounter }];
  if (limit.leakyBucket) return ['leaky_bucket', { ...limit.leakyBucket }];
  if (limit.gcra) return ['gcra', { ...limit.gcra }];
  return ['unknown', {}];
}

/** "capacity 10, 2/s" and the like: a limit's parameters in a few words. */
function describeParameters(algorithm: string, p: Record<string, number | string>): string {
  const n = (key: string) => formatNumber(Number(p[key]));
  switch (algorithm) {
    case 'token_bucket':
    case 'gcra':
      return `capacity ${n('capacity')}, +${n('refillPerSecond')}/s`;
    case 'leaky_bucket':
      return `capacity ${n('capacity')}, -${n('leakPerSecond')}/s, ${p.mode}`;
    case 'fixed_window':
    case 'sliding_window_log':
    case 'sliding_window_counter':
      return `${n('limit')} per ${p.window}`;
    default:
      return '';
  }
}

const policyJson = (policy: Policy) => ({
  name: policy.name,
  description: policy.description,
  failureMode: policy.failureMode?.mode ?? '',
  ...(policy.failureMode?.mode === 'local' && { localShare: policy.failureMode.localShare }),
  limits: policy.limits.map((limit) => {
    const [algorithm, parameters] = algorithmOf(limit);
    return { name: limit.name, keyBy: limit.keyBy, algorithm, ...parameters };
  }),
});

/** `quotactl policies`: the policies the service enforces (those the token may use). */
export function policiesCommand(ctx: CommandContext): Command {
  return new Command('policies')
    .summary('list the policies the service enforces')
    .description('List the policies the service enforces, with their limits. With a token, only the policies that token may use.')
    .action(async (_options: object, command: Command) => {
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { policies } = await ctx.withConnection(settings, (c) => c.call((call) => c.client.listPolicies({}, call)));
      if (printer.json) {
        printer.jsonLine({ policies: policies.map(policyJson) });
      } else {
        const rows = policies.flatMap((policy) =>
          policy.limits.map((limit, i) => {
            const [algorithm, parameters] = algorithmOf(limit);
            const failure = policy.failureMode?.mode === 'local' ? `local ${formatNumber(policy.failureMode.localShare)}` : (policy.failureMode?.mode ?? '');
            return [
              i === 0 ? printer.colors.bold(policy.name) : '',
              limit.name,
              limit.keyBy,
              algorithm,
              describeParameters(algorithm, parameters),
              i === 0 ? failure : '',
            ];
          }),
        );
        printer.line(printer.table(['policy', 'limit', 'key by', 'algorithm', 'parameters', 'on store failure'], rows));
      }
      ctx.exit(EXIT.ok);
    });
}
