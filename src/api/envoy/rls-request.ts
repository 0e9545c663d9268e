import { InvalidArgumentError, type UnitName } from '@quota-service/core';
import { Unit } from './envoy-codec.js';
import type { RateLimitRequest } from './envoy-codec.js';

/** Bounds of one request: far above what a proxy sends, low enough that no request costs the store much. */
export const MAX_DESCRIPTORS = 64;
export const MAX_ENTRIES = 32;
export const MAX_KEY_BYTES = 256;
export const MAX_VALUE_BYTES = 1024;
export const MAX_DOMAIN_BYTES = 256;

/** A descriptor's hits, as the request asks: a number of units, and whether they are only checked. */
export interface Hits {
  /** At least 1 (a check asks whether 1 would pass). */
  cost: number;
  checkOnly: boolean;
}

const UNIT_NAMES: Readonly<Record<number, UnitName>> = {
  [Unit.SECOND]: 'second',
  [Unit.MINUTE]: 'minute',
  [Unit.HOUR]: 'hour',
  [Unit.DAY]: 'day',
  [Unit.WEEK]: 'week',
  [Unit.MONTH]: 'month',
  [Unit.YEAR]: 'year',
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this pattern finds.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Checks a request before anything is matched or stored: INVALID_ARGUMENT
 * naming the field for an empty domain, no descriptors, a descriptor
 * without entries, an empty key or value, one too long or with control
 * characters or not valid UTF-8, too many descriptors or entries, an
 * override with an unknown unit, or hits beyond 2^53. Nothing is written
 * for a refused request.
 */
export function validateRlsRequest(request: RateLimitRequest): void {
  const domainProblem = textProblem(request.domain, MAX_DOMAIN_BYTES);
  if (domainProblem !== undefined) throw new InvalidArgumentError('domain', domainProblem);
  const descriptors = request.descriptors;
  if (descriptors.length === 0) throw new InvalidArgumentError('descriptors', 'at least one descriptor is required');
  if (descriptors.length > MAX_DESCRIPTORS) throw new InvalidArgumentError('descriptors', `at most ${MAX_DESCRIPTORS}, got ${descriptors.length}`);
  // Plain loops, and a field's name only built for a refusal: this runs on every call.
  for (let i = 0; i < descriptors.length; i++) {
    const descriptor = descriptors[i]!;
    const entries = descriptor.entries;
    if (entries.length === 0) throw new InvalidArgumentError(`descriptors[${i}].entries`, 'at least one entry is required');
    if (entries.length > MAX_ENTRIES) throw new InvalidArgumentError(`descriptors[${i}].entries`, `at most ${MAX_ENTRIES}, got ${entries.length}`);
    for (let j = 0; j < entries.length; j++) {
      const entry = entries[j]!;
      const keyProblem = textProblem(entry.key, MAX_KEY_BYTES);
      if (keyProblem !== undefined) throw new InvalidArgumentError(`descriptors[${i}].entries[${j}].key`, keyProblem);
      const valueProblem = textProblem(entry.value, MAX_VALUE_BYTES);
      if (valueProblem !== undefined) throw new InvalidArgumentError(`descriptors[${i}].entries[${j}].value`, valueProblem);
    }
    if (descriptor.limit !== undefined && UNIT_NAMES[descriptor.limit.unit] === undefined) {
      throw new InvalidArgumentError(`descriptors[${i}].limit.unit`, `must be a known unit (SECOND to YEAR, or WEEK), got ${descriptor.limit.unit}`);
    }
    if (descriptor.hits_addend !== undefined && descriptor.hits_addend.value > MAX_HITS) {
      throw new InvalidArgumentError(`descriptors[${i}].hits_addend`, `must be at most ${Number.MAX_SAFE_INTEGER}`);
    }
  }
}

const MAX_HITS = BigInt(Number.MAX_SAFE_INTEGER);

/** The unit of a descriptor's `limit` override (validated). */
export function overrideUnit(unit: number): UnitName {
  return UNIT_NAMES[unit]!;
}

/**
 * A descriptor's hits: its own hits_addend when set (0: check whether one
 * would pass, spending nothing), else the request's (0 or unset: 1).
 */
export function hitsOf(request: RateLimitRequest, index: number): Hits {
  const own = request.descriptors[index]?.hits_addend;
  if (own !== undefined) return own.value === 0n ? { cost: 1, checkOnly: true } : { cost: Number(own.value), checkOnly: false };
  return { cost: request.hits_addend === 0 ? 1 : request.hits_addend, checkOnly: false };
}

/** Why `value` is refused (empty, not valid UTF-8, over `maxBytes`, control characters), or undefined. */
function textProblem(value: string, maxBytes: number): string | undefined {
  if (value === '') return 'must not be empty';
  // A string the strict decoder marked (src/grpc/strict-utf8.ts) is never well-formed.
  if (!value.isWellFormed()) return 'not valid UTF-8';
  if (value.length > maxBytes || Buffer.byteLength(value, 'utf8') > maxBytes)
    return `must be at most ${maxBytes} bytes, got ${Buffer.byteLength(value, 'utf8')}`;
  if (CONTROL_CHARACTER.test(value)) return 'must not contain control characters';
  return undefined;
}
