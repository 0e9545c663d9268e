import type { LimitParameters } from '@quota-service/contract';
import { formatNumber } from './output.js';

/** The algorithms' names as the policy file writes them, by the contract's oneof field. */
const ALGORITHM_OF_FIELD = {
  tokenBucket: 'token_bucket',
  fixedWindow: 'fixed_window',
  slidingWindowLog: 'sliding_window_log',
  slidingWindowCounter: 'sliding_window_counter',
  leakyBucket: 'leaky_bucket',
  gcra: 'gcra',
  concurrency: 'concurrency',
} as const satisfies Record<keyof LimitParameters, string>;

export type AlgorithmName = (typeof ALGORITHM_OF_FIELD)[keyof typeof ALGORITHM_OF_FIELD];

/** The contract's oneof field of each algorithm. */
export const FIELD_OF_ALGORITHM = Object.fromEntries(Object.entries(ALGORITHM_OF_FIELD).map(([field, name]) => [name, field])) as Record<
  AlgorithmName,
  keyof LimitParameters
>;

export const ALGORITHM_NAMES = Object.values(ALGORITHM_OF_FIELD);

/**
 * The algorithm and parameters of a oneof the contract carries (a limit
 * definition, a plan, an override), e.g. ["token_bucket", {capacity: 10, refillPerSecond: 2}].
 */
export function algorithmOf(parameters: LimitParameters): [AlgorithmName | 'unknown', Record<string, number | string>] {
  for (const [field, name] of Object.entries(ALGORITHM_OF_FIELD) as [keyof LimitParameters, AlgorithmName][]) {
    const set = parameters[field];
    if (set !== undefined) return [name, { ...set }];
  }
  return ['unknown', {}];
}

/** "capacity 10, +2/s" and the like: a limit's parameters in a few words. */
export function describeParameters(algorithm: string, p: Record<string, number | string>): string {
  const n = (key: string) => formatRate(Number(p[key]));
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
    case 'concurrency':
      return `${n('limit')} leases, ${n('leaseTtlMs')} ms each`;
    default:
      return '';
  }
}

/** A parameter as people read it: like formatNumber, but a slow rate keeps two significant digits (0.001/s is not 0/s). */
function formatRate(n: number): string {
  return n > 0 && n < 0.01 ? String(Number(n.toPrecision(2))) : formatNumber(n);
}
