import { usageError } from './exit-codes.js';

/**
 * The identity from `part=value` arguments, e.g. `user=42 tenant=acme`. The
 * value is everything after the first "=" (it may hold "=" itself); a part
 * named twice is a mistake, not an override.
 */
export function parseIdentity(args: readonly string[]): Record<string, string> {
  const identity: Record<string, string> = {};
  for (const arg of args) {
    const at = arg.indexOf('=');
    if (at < 0) throw usageError(`identity: expected part=value (e.g. user=42), got ${JSON.stringify(arg)}`);
    const part = arg.slice(0, at);
    if (part === '') throw usageError(`identity: the part name is missing in ${JSON.stringify(arg)} (e.g. user=42)`);
    if (Object.hasOwn(identity, part)) throw usageError(`identity.${part}: given twice`);
    identity[part] = arg.slice(at + 1);
  }
  return identity;
}

/** `user=42 tenant=acme`, for headings. */
export const describeIdentity = (identity: Readonly<Record<string, string>>): string =>
  Object.entries(identity)
    .map(([part, value]) => `${part}=${value}`)
    .join(' ');
