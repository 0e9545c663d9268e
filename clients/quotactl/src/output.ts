import Table from 'cli-table3';
import picocolors from 'picocolors';
import type { CliIo } from './io.js';
import type { Settings } from './settings.js';

/** picocolors' formatters, on or off. */
type Colors = ReturnType<typeof picocolors.createColors>;

/** No borders, two spaces between columns: what `awk` and `grep` want when the output is piped. */
const PLAIN_CHARS = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: '',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '  ',
};

/**
 * How a command prints: a table with borders (and colour, unless NO_COLOR) for a
 * person at a terminal, aligned plain columns when piped, JSON with --json.
 */
export class Printer {
  readonly json: boolean;
  /** stdout is a terminal: boxes, in-place refresh. */
  readonly tty: boolean;
  readonly colors: Colors;

  constructor(
    private readonly io: CliIo,
    settings: Pick<Settings, 'json' | 'color'>,
  ) {
    this.json = settings.json;
    this.tty = io.stdout.isTTY === true;
    this.colors = picocolors.createColors(settings.color);
  }

  line(text = ''): void {
    this.io.stdout.write(`${text}\n`);
  }

  /** Text as it is (a terminal frame with its own escapes). */
  write(text: string): void {
    this.io.stdout.write(text);
  }

  /** A line on stderr, prefixed as quotactl's own. */
  error(text: string): void {
    this.io.stderr.write(`quotactl: ${text}\n`);
  }

  /** One JSON document on one line (a line per event for streaming commands). */
  jsonLine(value: unknown): void {
    this.io.stdout.write(`${JSON.stringify(value)}\n`);
  }

  /** Rendered table text (no trailing newline). */
  table(head: readonly string[], rows: readonly (readonly string[])[], align?: readonly ('left' | 'right')[]): string {
    const colAligns = align === undefined ? undefined : [...align];
    if (!this.tty) {
      const table = new Table({
        head: head.map((h) => h.toUpperCase().replaceAll(' ', '_')),
        chars: PLAIN_CHARS,
        style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
        ...(colAligns && { colAligns }),
      });
      table.push(...rows.map((r) => [...r]));
      return table
        .toString()
        .split('\n')
        .map((l) => l.trimEnd())
        .join('\n');
    }
    const table = new Table({ head: head.map((h) => this.colors.bold(h)), style: { head: [], border: [] }, ...(colAligns && { colAligns }) });
    table.push(...rows.map((r) => [...r]));
    return table.toString();
  }
}

/** A number as people read it: integers as they are, fractions to two places. */
export function formatNumber(n: number): string {
  if (Number.isInteger(n)) return String(n);
  return n.toFixed(2).replace(/\.?0+$/, '');
}

/** A duration in ms: "0", "250 ms", "1.5 s", "2 min 5 s", "23 h 38 min" (a day window's reset). */
export function formatMs(ms: number): string {
  if (ms <= 0) return '0';
  if (ms < 1_000) return `${formatNumber(ms)} ms`;
  if (ms < 60_000) return `${formatNumber(Math.round(ms / 100) / 10)} s`;
  // Rounded once, then split: 59.6 s past a minute is the next minute, never "1 min 60 s".
  const inHours = ms >= 3_600_000 - 500;
  const small = Math.round(ms / (inHours ? 60_000 : 1_000));
  const [whole, rest] = [Math.floor(small / 60), small % 60];
  const [bigUnit, smallUnit] = inHours ? ['h', 'min'] : ['min', 's'];
  return rest === 0 ? `${whole} ${bigUnit}` : `${whole} ${bigUnit} ${rest} ${smallUnit}`;
}
