import type { LimitStatus } from '@quota-service/contract';
import { formatMs, formatNumber, type Printer } from './output.js';

/** Every limit's status as a table: remaining in red when spent, yellow under a tenth. */
export function limitsTable(printer: Printer, limits: readonly LimitStatus[]): string {
  const { colors } = printer;
  const rows = limits.map((limit) => {
    const remaining = formatNumber(limit.remaining);
    const shown = limit.remaining < 1 ? colors.red(remaining) : limit.remaining < limit.limit / 10 ? colors.yellow(remaining) : colors.green(remaining);
    return [limit.name, limit.algorithm, shown, formatNumber(limit.limit), formatMs(limit.resetAfterMs)];
  });
  return printer.table(['limit', 'algorithm', 'remaining', 'of', 'resets in'], rows, ['left', 'left', 'right', 'right', 'right']);
}

/** The JSON shape of a limit's status (the contract's field names). */
export const limitJson = (limit: LimitStatus) => ({
  name: limit.name,
  algorithm: limit.algorithm,
  limit: limit.limit,
  remaining: limit.remaining,
  resetAfterMs: limit.resetAfterMs,
});
