import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { z } from 'zod';

/**
 * The callers file (QUOTA_AUTH_TOKENS): which calling service holds which
 * bearer token and which policies it may use.
 *
 *   callers:
 *     order-api:
 *       token_sha256: 9f86d0...   # hex SHA-256 of the token (preferred: the file holds no secret)
 *       policies: [orders, user]
 *     gateway:
 *       token: s3cret-from-a-kubernetes-secret
 *       policies: ['*']           # every policy
 */
const callerSchema = z
  .strictObject({
    token: z.string().min(16, 'must be at least 16 characters').optional(),
    token_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, 'must be 64 hex digits (sha256sum of the token)')
      .optional(),
    policies: z.array(z.string().min(1)).min(1, 'list the policies this caller may use, or ["*"] for all'),
  })
  .refine((c) => (c.token === undefined) !== (c.token_sha256 === undefined), { message: 'give exactly one of token, token_sha256', path: ['token'] });

const callersFileSchema = z.strictObject({
  callers: z.record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'use 1-64 letters, digits, "_", "." or "-"'), callerSchema),
});

export interface Caller {
  readonly name: string;
  /** Policies this caller may name; undefined means all. */
  readonly policies: ReadonlySet<string> | undefined;
}

/** Looks callers up by the SHA-256 of the token they present; no token is kept in memory. */
export interface CallerRegistry {
  byToken(token: string): Caller | undefined;
  readonly size: number;
}

export class CallersFileError extends Error {
  override name = 'CallersFileError';
}

export const tokenSha256 = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

/** The callers file's text (for the watcher, src/config/callers-watcher.ts) and its callers. */
export async function readCallersFile(path: string): Promise<{ text: string; callers: CallerRegistry }> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CallersFileError(`cannot read callers file ${path}: ${(error as Error).message}`);
  }
  return { text, callers: parseCallers(text, path) };
}

export function parseCallers(text: string, source = 'callers'): CallerRegistry {
  const document = parseDocument(text);
  // Never echo the file's content: it may hold tokens.
  if (document.errors.length > 0) throw new CallersFileError(`${source}: invalid YAML (line ${document.errors[0]!.linePos?.[0]?.line ?? '?'})`);
  const parsed = callersFileSchema.safeParse(document.toJS());
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new CallersFileError(`${source}: invalid callers:\n${lines.join('\n')}`);
  }
  const byHash = new Map<string, Caller>();
  for (const [name, entry] of Object.entries(parsed.data.callers)) {
    const hash = (entry.token_sha256 ?? tokenSha256(entry.token!)).toLowerCase();
    if (byHash.has(hash)) throw new CallersFileError(`${source}: callers.${name}: the same token as caller "${byHash.get(hash)!.name}"`);
    byHash.set(hash, Object.freeze({ name, policies: entry.policies.includes('*') ? undefined : new Set(entry.policies) }));
  }
  return {
    // A map lookup by hash: the timing of the lookup says nothing about the token.
    byToken: (token) => byHash.get(tokenSha256(token)),
    size: byHash.size,
  };
}
