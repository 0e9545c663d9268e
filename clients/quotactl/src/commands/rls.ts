import { Command, InvalidArgumentError, Option } from 'commander';
import { wholeNumber } from '../arg-parsers.js';
import type { CommandContext } from '../context.js';
import { EXIT, usageError } from '../exit-codes.js';
import { formatMs, formatNumber } from '../output.js';

/** A descriptor as Envoy sends it: its entries in order (a key may repeat). */
type Entry = { key: string; value: string };

interface RlsOptions {
  descriptor: Entry[][];
  hits?: number;
}

/** RateLimitResponse as proto-loader decodes it (field names as in the proto, enums by name). */
interface RlsResponse {
  overall_code: string;
  statuses: {
    code: string;
    current_limit: { name: string; requests_per_unit: number; unit: string } | null;
    limit_remaining: number;
    duration_until_reset: { seconds: number; nanos: number } | null;
  }[];
  response_headers_to_add: { key: string; value: string }[];
}

interface RlsClient {
  ShouldRateLimit(request: { domain: string; descriptors: { entries: Entry[] }[]; hits_addend: number }, options: object): Promise<RlsResponse>;
}

/** `key=value`: the value is everything after the first "=". */
function entryOf(text: string, where: string): Entry {
  const at = text.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError(`${where}: expected key=value, got ${JSON.stringify(text)}`);
  return { key: text.slice(0, at), value: text.slice(at + 1) };
}

/** `--descriptor k=v,k2=v2`, repeatable: one descriptor each. */
function descriptorOption(value: string, previous: Entry[][]): Entry[][] {
  return [...previous, value.split(',').map((part) => entryOf(part, '--descriptor'))];
}

/** `quotactl rls DOMAIN key=value… [--descriptor k=v,…]… [--hits N]`: one ShouldRateLimit call, as Envoy makes it. */
export function rlsCommand(ctx: CommandContext): Command {
  return new Command('rls')
    .summary("ask Envoy's rate limit API (ShouldRateLimit) for a decision (spends when OK)")
    .description(
      "Make one envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit call, as Envoy would: the key=value arguments are one descriptor's " +
        'entries, in order; --descriptor adds another descriptor (entries separated by commas). Hits are spent when the answer is OK.',
    )
    .argument('<domain>', 'the domain of the rate limit config (QUOTA_RLS_CONFIG)')
    .argument('[key=value...]', 'one descriptor, e.g. remote_address=10.0.0.1 path=/api')
    .addOption(new Option('--descriptor <key=value,...>', 'another descriptor (repeat for several)').argParser(descriptorOption).default([]))
    .addOption(new Option('--hits <n>', 'hits to add for each descriptor (hits_addend; default 1)').argParser(wholeNumber(0xffff_ffff)))
    .addHelpText('after', '\nExit status: 0 OK, 1 OVER_LIMIT, 2 usage, 3 unreachable, 4 credentials refused, 5 request refused.')
    .action(async (domain: string, entries: string[], options: RlsOptions, command: Command) => {
      const descriptors: Entry[][] = [];
      if (entries.length > 0) descriptors.push(entries.map((e) => entryOf(e, 'descriptor')));
      descriptors.push(...options.descriptor);
      if (descriptors.length === 0) throw usageError('descriptor: give key=value entries, or --descriptor key=value,…');
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const { protoService } = await import('../contract-protos.js');
      const definition = await protoService('envoy/service/ratelimit/v3/rls.proto', 'envoy.service.ratelimit.v3.RateLimitService');
      const request = { domain, descriptors: descriptors.map((d) => ({ entries: d })), hits_addend: options.hits ?? 0 };
      const response = await ctx.withConnection(settings, (c) =>
        c.call((call) => (c.service(definition) as unknown as RlsClient).ShouldRateLimit(request, call)),
      );
      const statuses = response.statuses.map((status, i) => ({
        descriptor: descriptors[i] ?? [],
        code: status.code,
        limit:
          status.current_limit === null
            ? null
            : { name: status.current_limit.name, requestsPerUnit: status.current_limit.requests_per_unit, unit: status.current_limit.unit },
        remaining: status.limit_remaining,
        resetAfterMs:
          status.duration_until_reset === null ? 0 : status.duration_until_reset.seconds * 1000 + Math.round(status.duration_until_reset.nanos / 1e6),
      }));
      const ok = response.overall_code !== 'OVER_LIMIT';
      if (printer.json) {
        printer.jsonLine({
          domain,
          overallCode: response.overall_code,
          statuses,
          headers: response.response_headers_to_add.map(({ key, value }) => ({ key, value })),
        });
      } else {
        const { colors } = printer;
        const text = (d: Entry[]) => d.map((e) => `${e.key}=${e.value}`).join(',');
        const verdict = ok ? colors.green(colors.bold(response.overall_code)) : colors.red(colors.bold(response.overall_code));
        printer.line(`${verdict} ${domain} ${descriptors.map(text).join(' ')}${options.hits === undefined ? '' : ` hits ${options.hits}`}`);
        const rows = statuses.map((s) => [
          text(s.descriptor),
          s.code === 'OVER_LIMIT' ? colors.red(s.code) : s.code,
          s.limit === null ? '-' : `${formatNumber(s.limit.requestsPerUnit)} per ${s.limit.unit.toLowerCase()}`,
          s.limit === null ? '-' : formatNumber(s.remaining),
          s.limit === null ? '-' : formatMs(s.resetAfterMs),
        ]);
        printer.line(printer.table(['descriptor', 'code', 'limit', 'remaining', 'resets in'], rows, ['left', 'left', 'right', 'right', 'right']));
      }
      ctx.exit(ok ? EXIT.ok : EXIT.denied);
    });
}
