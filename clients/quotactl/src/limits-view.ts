import { type LimitStatus, ParameterSource } from '@quota-service/contract';
import { formatMs, formatNumber, type Printer } from './output.js';

/** Where a limit's parameters came from, as --json says it (the contract's ParameterSource, without its prefix). */
const APPLIED: Partial<Record<number, string>> = {
  [ParameterSource.PARAMETER_SOURCE_DEFAULT]: 'default',
  [ParameterSource.PARAMETER_SOURCE_PLAN]: 'plan',
  [ParameterSource.PARAMETER_SOURCE_WILDCARD_OVERRIDE]: 'wildcard_override',
  [ParameterSource.PARAMETER_SOURCE_EXACT_OVERRIDE]: 'exact_override',
};

/** A status's `applied` as a word; '' from a service that does not say. */
const appliedName = (limit: Pick<LimitStatus, 'applied'>): string => APPLIED[limit.applied] ?? '';

/** "default", "plan pro", "override", "wildcard override": which parameters decided, for a person. */
function describeApplied(limit: Pick<LimitStatus, 'applied' | 'plan'>): string {
  const name = appliedName(limit);
  if (name === 'plan') return `plan ${limit.plan}`;
  if (name === 'exact_override') return 'override';
  return name.replace('_', ' ');
}

/** Every limit's status as a table: remaining in red when spent, yellow under a tenth; an override's parameters in bold. */
export function limitsTable(printer: Printer, limits: readonly LimitStatus[]): string {
  const { colors } = printer;
  const rows = limits.map((limit) => {
    const remaining = formatNumber(limit.remaining);
    const shown = limit.remaining < 1 ? colors.red(remaining) : limit.remaining < limit.limit / 10 ? colors.yellow(remaining) : colors.green(remaining);
    const applied = describeApplied(limit);
    return [
      limit.name,
      limit.algorithm,
      shown,
      formatNumber(limit.limit),
      formatMs(limit.resetAfterMs),
      applied.endsWith('override') ? colors.bold(applied) : applied,
    ];
  });
  return printer.table(['limit', 'algorithm', 'remaining', 'of', 'resets in', 'parameters'], rows, ['left', 'left', 'right', 'right', 'right', 'left']);
}

/** The JSON shape of a limit's status (the contract's field names; `applied` as a word, `plan` only with a plan). */
export const limitJson = (limit: LimitStatus) => ({
  name: limit.name,
  algorithm: limit.algorithm,
  limit: limit.limit,
  remaining: limit.remaining,
  resetAfterMs: limit.resetAfterMs,
  applied: appliedName(limit),
  ...(limit.plan !== '' && { plan: limit.plan }),
  ...(limit.algorithm === 'concurrency' && { leasesHeld: limit.leasesHeld }),
});
