import { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { EXIT, type ExitCode } from '../exit-codes.js';

/** The names the service reports health for: '' is the server as a whole. */
export const HEALTH_NAMES = ['', 'quota.v1.QuotaService', 'envoy.service.ratelimit.v3.RateLimitService'] as const;

/** A name the service does not know: its NOT_FOUND, or SERVICE_UNKNOWN from a server that answers so. */
const UNKNOWN = 'SERVICE_UNKNOWN';

/** The exit status of a health status: SERVING 0, NOT_SERVING 1, a name the service does not know 5. */
function exitOf(status: string): ExitCode {
  if (status === 'SERVING') return EXIT.ok;
  if (status === 'NOT_SERVING') return EXIT.denied;
  return EXIT.rejected;
}

interface HealthOptions {
  service?: string;
}

interface HealthClient {
  Check(request: { service: string }, options: object): Promise<{ status: string }>;
}

/** `quotactl health [--service NAME]`: grpc.health.v1 Check, as a load balancer or a probe asks it. */
export function healthCommand(ctx: CommandContext): Command {
  return new Command('health')
    .summary('whether the service is serving (grpc.health.v1)')
    .description(
      `Ask the service's grpc.health.v1 Check whether it serves: the server as a whole ('') and each API (${HEALTH_NAMES.slice(1).join(', ')}), ` +
        'or only --service. A service that has started but cannot reach its store yet answers NOT_SERVING.',
    )
    .option('--service <name>', "one name to check ('' is the server as a whole)")
    .addHelpText(
      'after',
      '\nExit status: 0 serving (every name checked), 1 NOT_SERVING, 3 unreachable or no answer in time, 4 credentials refused, 5 no service of that name.\n' +
        'Without --service the status is the first name that is not SERVING.',
    )
    .action(async (options: HealthOptions, command: Command) => {
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const [{ protoService }, { ClientError, Status }] = await Promise.all([import('../contract-protos.js'), import('nice-grpc')]);
      const definition = await protoService('grpc/health/v1/health.proto', 'grpc.health.v1.Health');
      const names = options.service === undefined ? HEALTH_NAMES : [options.service];
      const statuses = await ctx.withConnection(settings, async (c) => {
        const health = c.service(definition) as unknown as HealthClient;
        const out: { service: string; status: string }[] = [];
        for (const service of names) {
          const status = await c.call(async (call) => {
            try {
              return (await health.Check({ service }, call)).status;
            } catch (error) {
              // The service's answer for a name it does not serve: a status of that name, not a failure of the command.
              if (error instanceof ClientError && error.code === Status.NOT_FOUND) return UNKNOWN;
              throw error;
            }
          });
          out.push({ service, status });
        }
        return out;
      });
      if (printer.json) printer.jsonLine({ services: statuses });
      else {
        const { colors } = printer;
        const rows = statuses.map(({ service, status }) => [
          service === '' ? "'' (the server)" : service,
          status === 'SERVING' ? colors.green(status) : colors.red(status),
        ]);
        printer.line(printer.table(['service', 'status'], rows));
      }
      ctx.exit(statuses.map((s) => exitOf(s.status)).find((code) => code !== EXIT.ok) ?? EXIT.ok);
    });
}
