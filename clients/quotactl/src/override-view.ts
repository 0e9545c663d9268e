import ms from 'ms';
import { type Override, OverrideMatch } from '@quota-service/contract';
import { describeKeyValue } from './override-args.js';
import type { Printer } from './output.js';
import { algorithmOf, describeParameters } from './parameters-view.js';

/**
 * An override as --json prints it: the key flattened (`match` as "exact" or
 * "prefix"), the algorithm named, and the contract's other field names;
 * `valueSha256` only for a value the token may not see (`value` is "" then).
 */
export function overrideJson(override: Override) {
  const [algorithm, parameters] = algorithmOf(override.parameters ?? {});
  return {
    limit: override.key?.limit ?? '',
    match: override.key?.match === OverrideMatch.OVERRIDE_MATCH_PREFIX ? 'prefix' : 'exact',
    value: override.key?.value ?? '',
    ...(override.valueSha256 === '' ? {} : { valueSha256: override.valueSha256 }),
    keyBy: override.keyBy,
    algorithm,
    parameters,
    expiresAtMs: override.expiresAtMs,
    reason: override.reason,
    setBy: override.setBy,
    setAtMs: override.setAtMs,
  };
}

/** The VALUE column: the value (`value*` for a prefix), or `sha256:<digest>` for one the token may not see. */
function listedValue(override: Override): string {
  if (override.valueSha256 === '') return describeKeyValue(override.key);
  return `sha256:${override.valueSha256}${override.key?.match === OverrideMatch.OVERRIDE_MATCH_PREFIX ? '*' : ''}`;
}

/** "in 2h (2025-01-01T14:00:00Z)", or "never": when an override stops applying, seen from now. */
export function describeExpiry(expiresAtMs: number, nowMs = Date.now()): string {
  if (expiresAtMs === 0) return 'never';
  const at = new Date(expiresAtMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const left = expiresAtMs - nowMs;
  return left > 0 ? `in ${ms(left)} (${at})` : `now (${at})`;
}

/** "capacity 500, +10/s": an override's parameters in a few words. */
export function describeOverrideParameters(override: Override): string {
  const [algorithm, parameters] = algorithmOf(override.parameters ?? {});
  return describeParameters(algorithm, parameters);
}

/** Overrides as a table, one a row. */
export function overridesTable(printer: Printer, overrides: readonly Override[], nowMs = Date.now()): string {
  const rows = overrides.map((o) => [
    o.key?.limit ?? '',
    o.keyBy,
    listedValue(o),
    describeOverrideParameters(o),
    describeExpiry(o.expiresAtMs, nowMs),
    o.setBy,
    o.reason,
  ]);
  return printer.table(['limit', 'key by', 'value', 'parameters', 'expires', 'set by', 'reason'], rows);
}

/** One override as a few lines for a person: what it matches, its parameters, its expiry, who set it and why. */
export function describeOverride(printer: Printer, override: Override, nowMs = Date.now()): string {
  const { colors } = printer;
  const match = override.key?.match === OverrideMatch.OVERRIDE_MATCH_PREFIX ? 'every value starting with' : '';
  const value = override.key?.value ?? '';
  return [
    `${colors.bold(override.key?.limit ?? '')} for ${override.keyBy} ${match === '' ? `= ${value}` : `${match} ${JSON.stringify(value)}`}: ${describeOverrideParameters(override)}`,
    `  expires ${describeExpiry(override.expiresAtMs, nowMs)}`,
    `  set by ${override.setBy} at ${new Date(override.setAtMs).toISOString()}${override.reason === '' ? '' : `: ${override.reason}`}`,
  ].join('\n');
}
