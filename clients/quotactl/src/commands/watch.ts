import { setTimeout as sleep } from 'node:timers/promises';
import { Command, Option } from 'commander';
import { wholeNumber } from '../arg-parsers.js';
import type { LimitStatus } from '@quota-service/contract';
import type { CommandContext } from '../context.js';
import { CliError, EXIT } from '../exit-codes.js';
import { describeIdentity, parseIdentity } from '../identity-args.js';
import { formatNumber, type Printer } from '../output.js';

/** Clears what the last frame drew: cursor up `lines`, to column 0, erase to the end of the screen. */
const erase = (lines: number) => (lines > 0 ? `\x1b[${lines}A\r\x1b[0J` : '\r\x1b[0J');

/** What counts as a change: the numbers a person sees, not the countdown to the next reset. */
const fingerprint = (limits: readonly LimitStatus[]) => limits.map((l) => `${l.name}=${formatNumber(l.remaining)}/${formatNumber(l.limit)}`).join(' ');

/**
 * `quotactl watch POLICY part=value…`: GetQuota every --interval. On a terminal
 * the table is redrawn in place; piped, one line per change (--json: one JSON
 * document per change). Ctrl-C stops it (exit 0). While the service cannot be
 * reached it says so and keeps trying; a refused request ends it.
 */
export function watchCommand(ctx: CommandContext): Command {
  return new Command('watch')
    .summary("follow an identity's remaining quota live")
    .description(
      'Follow what the identity has left of POLICY, spending nothing: redrawn in place on a terminal, one line per change when piped (--json: one JSON document per change). Ctrl-C stops it. While the service is unreachable it keeps trying; a refused request (unknown policy, bad token) ends it.',
    )
    .argument('<policy>', 'the policy whose limits to follow')
    .argument('<part=value...>', 'the identity, e.g. user=42 tenant=acme')
    .addOption(new Option('--interval <ms>', 'how often to ask').default(1000).argParser(wholeNumber(3_600_000)))
    .action(async (policy: string, parts: string[], options: { interval: number }, command: Command) => {
      const identity = parseIdentity(parts);
      const settings = ctx.settings(command);
      const printer = ctx.printer(settings);
      const stop = ctx.io.interrupt;
      const limitsView = await import('../limits-view.js');
      const view = printer.json
        ? jsonView(printer, policy, identity, limitsView)
        : printer.tty
          ? terminalView(printer, policy, identity, limitsView)
          : lineView(printer);
      await ctx.withConnection(settings, async (c) => {
        while (!stop.aborted) {
          try {
            const { limits } = await c.call((call) => c.client.getQuota({ policy, identity }, call));
            view.show(limits);
          } catch (error) {
            if (stop.aborted) break;
            if (!(error instanceof CliError) || error.code !== EXIT.unavailable) throw error;
            view.trouble(error.message);
          }
          await sleep(options.interval, undefined, { signal: stop }).catch(() => {});
        }
      });
      ctx.exit(EXIT.ok);
    });
}

interface WatchView {
  show(limits: readonly LimitStatus[]): void;
  /** The service could not be asked this time (it keeps trying). */
  trouble(message: string): void;
}

/** The views of limits-view.ts, loaded by the action (the contract comes with them). */
type LimitsView = typeof import('../limits-view.js');

/** A terminal: the table redrawn in place at every answer (the reset countdown moves too). */
function terminalView(printer: Printer, policy: string, identity: Record<string, string>, { limitsTable }: LimitsView): WatchView {
  let drawn = 0;
  let last = '';
  const draw = (body: string) => {
    const frame = `${printer.colors.bold(policy)} ${describeIdentity(identity)}  ${printer.colors.dim(`${new Date().toLocaleTimeString()}, Ctrl-C to stop`)}\n${body}\n`;
    printer.write(`${erase(drawn)}${frame}`);
    drawn = frame.split('\n').length - 1;
  };
  return {
    show(limits) {
      last = limitsTable(printer, limits);
      draw(last);
    },
    trouble: (message) => draw(`${last === '' ? '' : `${last}\n`}${printer.colors.yellow(`no answer: ${message}; trying again`)}`),
  };
}

/** Piped: one line per change, `<time> <limit>=<remaining>/<limit> …`; trouble once per new message, on stderr. */
function lineView(printer: Printer): WatchView {
  let last = '';
  let lastTrouble = '';
  return {
    show(limits) {
      lastTrouble = '';
      const now = fingerprint(limits);
      if (now === last) return;
      last = now;
      printer.line(`${new Date().toISOString()} ${now}`);
    },
    trouble(message) {
      if (message !== lastTrouble) printer.error(`no answer: ${message}; trying again`);
      lastTrouble = message;
    },
  };
}

/** --json: one document per change, {time, policy, identity, limits}; trouble as {time, error}. */
function jsonView(printer: Printer, policy: string, identity: Record<string, string>, { limitJson }: LimitsView): WatchView {
  let last = '';
  let lastTrouble = '';
  return {
    show(limits) {
      lastTrouble = '';
      const now = fingerprint(limits);
      if (now === last) return;
      last = now;
      printer.jsonLine({ time: new Date().toISOString(), policy, identity, limits: limits.map(limitJson) });
    },
    trouble(message) {
      if (message !== lastTrouble) printer.jsonLine({ time: new Date().toISOString(), error: message });
      lastTrouble = message;
    },
  };
}
