import { type LimitParameters, type OverrideKey, OverrideMatch } from '@quota-service/contract';
import { usageError } from './exit-codes.js';
import { type AlgorithmName, FIELD_OF_ALGORITHM } from './parameters-view.js';

/**
 * `LIMIT VALUE` names an exact override, `LIMIT PREFIX*` a wildcard one (every
 * identity value that starts with PREFIX). With `exact`, a trailing `*` is part
 * of the value.
 */
export function overrideKey(limit: string, value: string, exact = false): OverrideKey {
  if (limit === '') throw usageError('LIMIT: must not be empty');
  if (!exact && value.endsWith('*')) {
    const prefix = value.slice(0, -1);
    if (prefix === '') throw usageError('VALUE: a wildcard needs a prefix before "*" (e.g. acme-*): "*" alone would match every identity');
    return { limit, match: OverrideMatch.OVERRIDE_MATCH_PREFIX, value: prefix };
  }
  if (value === '') throw usageError('VALUE: must not be empty');
  return { limit, match: OverrideMatch.OVERRIDE_MATCH_EXACT, value };
}

/** `42`, or `acme-*` for a prefix: how quotactl writes an override's value. */
export const describeKeyValue = (key: OverrideKey | undefined): string =>
  key === undefined ? '' : key.match === OverrideMatch.OVERRIDE_MATCH_PREFIX ? `${key.value}*` : key.value;

/** The parameter options of `overrides set`, as commander parsed them. */
export interface ParameterOptions {
  capacity?: number;
  refillPerSecond?: number;
  leakPerSecond?: number;
  mode?: string;
  limit?: number;
  leaseTtlMs?: number;
}

/** The option of each parameter, for messages. */
const FLAG: Record<keyof ParameterOptions, string> = {
  capacity: '--capacity',
  refillPerSecond: '--refill-per-second',
  leakPerSecond: '--leak-per-second',
  mode: '--mode',
  limit: '--limit',
  leaseTtlMs: '--lease-ttl-ms',
};

/** Each algorithm's parameters (the contract's field names, which are the options' too). */
const PARAMETERS_OF: Record<AlgorithmName, readonly (keyof ParameterOptions)[]> = {
  token_bucket: ['capacity', 'refillPerSecond'],
  gcra: ['capacity', 'refillPerSecond'],
  leaky_bucket: ['capacity', 'leakPerSecond', 'mode'],
  // A window's length is not a parameter an override may change: the identity's state counts in the limit's own window.
  fixed_window: ['limit'],
  sliding_window_log: ['limit'],
  sliding_window_counter: ['limit'],
  concurrency: ['limit', 'leaseTtlMs'],
};

/** "--capacity, --refill-per-second": the options an algorithm takes. */
export const flagsOf = (algorithm: AlgorithmName): string => PARAMETERS_OF[algorithm].map((p) => FLAG[p]).join(', ');

/**
 * The override's parameters for a limit of `algorithm`, from the options
 * given. An option left out is sent unset (0 or ""), which the service reads
 * as "as the limit has it in the policy file". An option of another algorithm
 * is a mistake, not something to ignore.
 */
export function limitParameters(limitName: string, algorithm: AlgorithmName, options: ParameterOptions): LimitParameters {
  const own = PARAMETERS_OF[algorithm];
  const given = (Object.keys(FLAG) as (keyof ParameterOptions)[]).filter((p) => options[p] !== undefined);
  const foreign = given.find((p) => !own.includes(p));
  if (foreign !== undefined) throw usageError(`${FLAG[foreign]}: limit "${limitName}" is a ${algorithm}, whose parameters are ${flagsOf(algorithm)}`);
  if (given.length === 0) throw usageError(`give the new parameters of limit "${limitName}" (${algorithm}): ${flagsOf(algorithm)}`);
  const message: Record<string, number | string> = {};
  for (const parameter of own) message[parameter] = options[parameter] ?? (parameter === 'mode' ? '' : 0);
  return { [FIELD_OF_ALGORITHM[algorithm]]: message };
}
