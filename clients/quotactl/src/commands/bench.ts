import cliProgress from 'cli-progress';
import { Command, Option } from 'commander';
import { duration, wholeNumber } from '../arg-parsers.js';
import type { BenchPlan, BenchProgress, BenchResult } from '../bench-run.js';
import type { CommandContext } from '../context.js';
import { EXIT, usageError } from '../exit-codes.js';
import { parseIdentity } from '../identity-args.js';
import type { CliStream } from '../io.js';
import { formatMs, formatNumber, type Printer } from '../output.js';

interface BenchOptions {
  policy: string;
  concurrency: number;
  duration: number;
  users: number;
  userPart: string;
  requests?: number;
  cost?: number;
}

/** `quotactl bench --policy P`: load with a progress bar, then decisions/s and latency percentiles. */
export function benchCommand(ctx: CommandContext): Command {
  return new Command('bench')
    .summary('load the service and report decisions/s and latency')
    .description(
      'Send Allow calls as fast as CONCURRENCY callers can, round-robin over USERS identities, for the duration; then print decisions/s and latency percentiles. The calls spend real quota of those identities.',
    )
    .argument('[part=value...]', 'identity parts every call carries, e.g. tenant=acme')
    .requiredOption('--policy <name>', 'the policy to decide by')
    .addOption(new Option('--concurrency <n>', 'calls in flight at once').default(16).argParser(wholeNumber(10_000)))
    .addOption(new Option('--duration <time>', 'how long to run: 10s, 500ms, 2m').default(10_000, '10s').argParser(duration))
    .addOption(new Option('--users <n>', 'distinct identities to spread the calls over').default(100).argParser(wholeNumber(10_000_000)))
    .option('--user-part <part>', 'the identity part that varies per user', 'user')
    .addOption(new Option('--requests <n>', 'stop after this many calls (or at the end of --duration)').argParser(wholeNumber(1e9)))
    .addOption(new Option('--cost <n>', 'units each call spends').argParser(wholeNumber(1e9)))
    .addHelpText(
      'after',
      '\nExit status: 0 when every call got a decision (allowed or denied), 3 when some got none, 4 or 5 when the service refused the calls.',
    )
    .action(async (parts: string[], options: BenchOptions, command: Command) => {
      const fixed = parseIdentity(parts);
      if (options.userPart === '') throw usageError('--user-part: must not be empty');
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const plan: BenchPlan = {
        policy: options.policy,
        fixed,
        userPart: options.userPart,
        users: options.users,
        concurrency: options.concurrency,
        durationMs: options.duration,
        requests: options.requests,
        cost: options.cost ?? 0,
        graceMs: settings.timeoutMs,
      };
      const bar = progressBar(ctx.io.stderr, plan);
      let result: BenchResult;
      try {
        const { runBench } = await import('../bench-run.js');
        result = await ctx.withConnection(settings, (c) => runBench(c, plan, ctx.io.interrupt, (p) => bar?.update(p)));
      } finally {
        bar?.stop();
      }
      if (printer.json) printer.jsonLine({ policy: plan.policy, concurrency: plan.concurrency, users: plan.users, ...result });
      else printer.line(summaryTable(printer, plan, result));
      const failed = Object.keys(result.errors).length > 0;
      ctx.exit(failed ? EXIT.unavailable : EXIT.ok);
    });
}

/** A bar on stderr for a person at a terminal; none when stderr is piped. */
function progressBar(stream: CliStream, plan: BenchPlan): { update(p: BenchProgress): void; stop(): void } | undefined {
  if (stream.isTTY !== true) return undefined;
  const byRequests = plan.requests !== undefined;
  const total = byRequests ? plan.requests! : Math.round(plan.durationMs / 100) / 10;
  const bar = new cliProgress.SingleBar(
    {
      stream: stream as unknown as NodeJS.WritableStream,
      format: `bench ${plan.policy} |{bar}| {value}/{total} ${byRequests ? 'calls' : 's'} | {rate} decisions/s`,
      hideCursor: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { rate: '0' });
  return {
    update: ({ elapsedMs, calls }) => {
      const value = byRequests ? calls : Math.min(total, Math.round(elapsedMs / 100) / 10);
      bar.update(value, { rate: elapsedMs > 0 ? Math.round((calls * 1000) / elapsedMs) : 0 });
    },
    stop: () => bar.stop(),
  };
}

function summaryTable(printer: Printer, plan: BenchPlan, r: BenchResult): string {
  const ms = (v: number) => `${v.toFixed(2)} ms`;
  const errors = Object.entries(r.errors);
  const rows: string[][] = [
    ['policy', plan.policy],
    ['concurrency', String(plan.concurrency)],
    ['users', String(plan.users)],
    ['duration', `${formatMs(r.durationMs)}${r.interrupted ? ' (interrupted)' : ''}`],
    ['decisions', String(r.decisions)],
    ['allowed', String(r.allowed)],
    ['denied', String(r.denied)],
    ['no decision', errors.length === 0 ? '0' : errors.map(([name, n]) => `${n} ${name}`).join(', ')],
    ['decisions/s', printer.colors.bold(formatNumber(Math.round(r.decisionsPerSecond * 10) / 10))],
    ['latency p50', ms(r.latencyMs.p50)],
    ['latency p90', ms(r.latencyMs.p90)],
    ['latency p99', ms(r.latencyMs.p99)],
    ['latency p99.9', ms(r.latencyMs.p999)],
    ['latency max', ms(r.latencyMs.max)],
  ];
  return printer.table(['measure', 'value'], rows, ['left', 'right']);
}
