import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { type Document, isMap, isNode, isScalar, LineCounter, type Pair } from 'yaml';
import { z } from 'zod';
import { KEY_SEGMENT_PATTERN, parseYaml, YamlLimitError, YamlTextError, yamlValue } from '@quota-service/core';
import { type CallerPlace, describeCaller, describeCallerIssues, shortSha256 } from './callers-file-problems.js';

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
 *     envoy:
 *       token_sha256: 2c26b4...
 *       domains: [edge]           # Envoy's rate limit service: the domains it may ask about (['*'] for all)
 *       roles: [gateway]          # a proxy: the `limit` its descriptors carry is honoured
 *     support:
 *       token_sha256: 4b2c1e...
 *       policies: ['*']
 *       roles: [admin]            # may also call QuotaAdminService
 */
export const CALLER_ROLES = ['admin', 'gateway'] as const;
export type CallerRole = (typeof CALLER_ROLES)[number];

const callerSchema = z
  .strictObject({
    token: z.string().min(16, 'must be at least 16 characters').optional(),
    token_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, 'must be 64 hex digits (sha256sum of the token)')
      .optional(),
    // A name no policy can have is a certain typo: refused here. A well-formed name the
    // policy file lacks is only warned about (src/config/caller-policies.ts): the two
    // files reload independently, so either may be updated first.
    policies: z
      .array(
        z
          .string()
          .min(1)
          .refine(
            (policy) => policy === '*' || KEY_SEGMENT_PATTERN.test(policy),
            'not a policy name (1-64 lowercase letters, digits, "_", "." or "-", starting with a letter or digit) nor "*"',
          ),
      )
      .min(1, 'list the policies this caller may use, or ["*"] for all')
      .optional(),
    // Envoy's rate limit service (ShouldRateLimit): the domains this caller may ask about.
    domains: z.array(z.string().min(1)).min(1, 'list the domains this caller may ask about, or ["*"] for all').optional(),
    /**
     * Extra rights: `admin` may call QuotaAdminService (reset, overrides, validate);
     * `gateway` (a proxy such as Envoy, which builds descriptors from its route
     * configuration) has the `limit` of its ShouldRateLimit descriptors honoured.
     */
    roles: z.array(z.enum(CALLER_ROLES, { error: `must be one of ${CALLER_ROLES.map((r) => `"${r}"`).join(', ')}` })).optional(),
  })
  .refine((c) => (c.token === undefined) !== (c.token_sha256 === undefined), { message: 'give exactly one of token, token_sha256', path: ['token'] })
  // An admin-only caller (roles: [admin], for the admin API alone) needs neither.
  .refine((c) => c.policies !== undefined || c.domains !== undefined || c.roles?.includes('admin') === true, {
    message: 'list the policies this caller may use (or ["*"]), the rate limit domains it may ask about, or both',
    path: ['policies'],
  })
  // The gateway role is about ShouldRateLimit alone: without domains it would do nothing.
  .refine((c) => c.roles?.includes('gateway') !== true || c.domains !== undefined, {
    message: 'the gateway role is for callers of the rate limit service: list the domains it may ask about',
    path: ['roles'],
  });

/** A caller's name: also what the call log lines print. */
const CALLER_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export interface Caller {
  readonly name: string;
  /** Policies this caller may name; undefined means all. */
  readonly policies: ReadonlySet<string> | undefined;
  /** Domains of Envoy's rate limit service this caller may ask about; undefined means all, empty means none. */
  readonly domains: ReadonlySet<string> | undefined;
  /** Its roles: `admin` may call the admin API; a `gateway`'s descriptor limits are honoured (ShouldRateLimit). */
  readonly roles: ReadonlySet<CallerRole>;
}

/** Looks callers up by the SHA-256 of the token they present; no token is kept in memory. */
export interface CallerRegistry {
  byToken(token: string): Caller | undefined;
  readonly size: number;
  /** Every caller, in file order. */
  readonly list: readonly Caller[];
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

/**
 * The callers of a callers file's text, or a CallersFileError listing every
 * problem found. Its message never repeats the file's content, not even a
 * caller's name: a token may sit where a name belongs (src/config/callers-file-problems.ts).
 */
export function parseCallers(text: string, source = 'callers'): CallerRegistry {
  const problems: string[] = [];
  const byHash = new Map<string, { caller: Caller; place: CallerPlace }>();
  for (const { place, entry } of readCallerEntries(text, source, problems)) {
    const label = describeCaller(place);
    if (!CALLER_NAME.test(place.name)) problems.push(`${label}: the name must be 1-64 letters, digits, "_", "." or "-"`);
    const parsed = callerSchema.safeParse(entry);
    if (!parsed.success) {
      for (const line of describeCallerIssues(parsed.error.issues)) problems.push(`${label}: ${line}`);
      continue;
    }
    const hash = (parsed.data.token_sha256 ?? tokenSha256(parsed.data.token!)).toLowerCase();
    const first = byHash.get(hash);
    if (first !== undefined) {
      problems.push(`${label} has the same token as ${describeCaller(first.place)}`);
      continue;
    }
    // No policies listed: none (a caller for the rate limit service, or the admin API, only); likewise no domains.
    const policies = parsed.data.policies ?? [];
    const domains = parsed.data.domains ?? [];
    byHash.set(hash, {
      place,
      caller: Object.freeze({
        name: place.name,
        policies: policies.includes('*') ? undefined : new Set(policies),
        domains: domains.includes('*') ? undefined : new Set(domains),
        roles: new Set(parsed.data.roles ?? []),
      }),
    });
  }
  if (problems.length > 0) throw new CallersFileError(`${source}: invalid callers:\n${problems.map((problem) => `  ${problem}`).join('\n')}`);
  return {
    // A map lookup by hash: the timing of the lookup says nothing about the token.
    byToken: (token) => byHash.get(tokenSha256(token))?.caller,
    size: byHash.size,
    list: [...byHash.values()].map(({ caller }) => caller),
  };
}

/**
 * The file's entries (callerEntries) read from its YAML. The yaml package's messages
 * quote the file, so its error names only the line; a limit's message quotes nothing.
 */
function readCallerEntries(text: string, source: string, problems: string[]): { place: CallerPlace; entry: unknown }[] {
  const lineCounter = new LineCounter();
  try {
    return callerEntries(parseYaml(text, { lineCounter }), lineCounter, problems);
  } catch (error) {
    if (error instanceof YamlLimitError) throw new CallersFileError(`${source}: invalid YAML: ${error.message}`);
    if (error instanceof YamlTextError) throw new CallersFileError(`${source}: invalid YAML (line ${error.problems[0]?.line ?? '?'})`);
    throw error;
  }
}

/**
 * The entries under `callers:`, in file order, each with its place in the
 * file; a problem with the file's shape goes to `problems`. Read from the YAML
 * nodes, not from a plain object: an object orders keys that look like
 * numbers first, and turns a name of digits into a number.
 */
function callerEntries(document: Document.Parsed, lineCounter: LineCounter, problems: string[]): { place: CallerPlace; entry: unknown }[] {
  const root = document.contents;
  if (!isMap(root)) {
    problems.push('the file must be a mapping with the key "callers"');
    return [];
  }
  const lineOf = (pair: Pair<unknown, unknown>) => {
    const node = isNode(pair.key) ? pair.key : pair.value;
    return isNode(node) && node.range ? lineCounter.linePos(node.range[0]).line : 0;
  };
  let callers: unknown;
  let found = false;
  for (const pair of root.items) {
    if (keyText(pair.key) === 'callers') {
      callers = pair.value;
      found = true;
    } else {
      problems.push(`an unknown top-level key (line ${lineOf(pair)}, ${shortSha256(keyText(pair.key))}): the file holds "callers" only`);
    }
  }
  if (!found) {
    problems.push('callers: missing');
    return [];
  }
  if (!isMap(callers)) {
    problems.push('callers: must be a mapping of caller names to callers');
    return [];
  }
  return callers.items.map((pair, index) => ({
    place: { position: index + 1, line: lineOf(pair), name: keyText(pair.key) },
    entry: isNode(pair.value) ? yamlValue(document, pair.value) : pair.value,
  }));
}

/** A key as written: `123` is the name "123", not a number. */
function keyText(key: unknown): string {
  if (!isScalar(key)) return String(key ?? '');
  return typeof key.value === 'string' ? key.value : (key.source ?? String(key.value));
}
