import { createHash } from 'node:crypto';
import type { z } from 'zod';

/**
 * What the callers file loader may say about the file. The file's names may
 * well be secrets (a token pasted where a caller's name belongs), so a
 * message never prints a name or a value: a caller is told by its position,
 * its line and the first 8 hex digits of the SHA-256 of its name
 * (`printf %s NAME | sha256sum`), an unknown key by that hash alone.
 */

/** Where a caller sits in the file. */
export interface CallerPlace {
  /** 1 for the first caller under `callers:`. */
  position: number;
  line: number;
  name: string;
}

/** The first 8 hex digits of the SHA-256 of `text`: enough to tell names apart, nothing to recover a secret from. */
export const shortSha256 = (text: string): string => `sha256 ${createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 8)}`;

/** "the 3rd caller (line 7, name sha256 1a2b3c4d)" */
export function describeCaller(place: CallerPlace): string {
  return `the ${ordinal(place.position)} caller (line ${place.line}, name ${shortSha256(place.name)})`;
}

function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** The fields a caller may have: the only path segments and keys a message prints as they are. */
const CALLER_FIELDS = new Set(['token', 'token_sha256', 'policies', 'domains', 'roles']);

/**
 * Issues whose zod message repeats nothing of the input (the schema's own
 * messages, types and bounds). Any other issue gets a plain word instead:
 * `unrecognized_keys`, for one, lists the keys.
 */
const PLAIN_ISSUES = new Set(['invalid_type', 'too_small', 'too_big', 'invalid_format', 'custom']);

/**
 * One line per problem zod found in one caller's entry, the first for each
 * field (`token: must be at least 16 characters`): a list where a string
 * belongs is not also too short.
 */
export function describeCallerIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  const lines: string[] = [];
  const fields = new Set<string>();
  for (const issue of issues) {
    const path = issue.path.map((segment) => (typeof segment === 'number' || CALLER_FIELDS.has(String(segment)) ? String(segment) : 'an unknown field'));
    const at = path.length === 0 ? '' : `${path.join('.')}: `;
    if (at !== '' && fields.has(at)) continue;
    fields.add(at);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        lines.push(`${at}unknown field (${shortSha256(key)}): a caller has token or token_sha256, policies and/or domains, and optionally roles`);
      }
    } else {
      lines.push(`${at}${PLAIN_ISSUES.has(issue.code) ? issue.message : 'invalid value'}`);
    }
  }
  return lines;
}
