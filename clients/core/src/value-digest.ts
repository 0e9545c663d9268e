import { createHash } from 'node:crypto';

/**
 * An identity value as logs show it: the first 16 hex digits of its SHA-256
 * (`printf %s acme | sha256sum`). Identity values may be API keys or personal
 * data, and no log line carries one; the digest still lets an operator find
 * every line about a value they know (`quotactl hash user=acme`).
 */
export const valueDigest = (value: string): string => createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 16);

/** At most this many identity parts, and this many characters of a name, go on a log line: a refused request may carry anything. */
const MAX_PARTS = 16;
const MAX_CHARS = 64;

/** A name as a request gave it (a policy, a limit, an identity part), at most MAX_CHARS characters of it. */
export const cappedName = (name: string): string => (name.length <= MAX_CHARS ? name : `${name.slice(0, MAX_CHARS)}…`);

/** Identity parts by name (sorted), each value as its digest; at most MAX_PARTS of them. */
export function identityDigests(identity: Readonly<Record<string, string>>): Record<string, string> {
  const names: string[] = [];
  for (const name in identity) {
    if (names.length === MAX_PARTS) break;
    if (Object.hasOwn(identity, name)) names.push(name);
  }
  const out: Record<string, string> = {};
  for (const name of names.sort()) out[cappedName(name)] = valueDigest(identity[name]!);
  return out;
}
