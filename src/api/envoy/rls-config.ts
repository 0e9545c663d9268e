import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { parseYaml, YamlTextError, yamlValue } from '@quota-service/core';
import { type Document, isMap, isNode, isScalar, LineCounter } from 'yaml';
import type { z } from 'zod';
import { type DescriptorDefinition, type RlsFile, rlsFileSchema } from './rls-config-schema.js';
import { domainPolicy, pathSegment, type RlsConfig, type RlsDomain, type RlsEntry, type RlsLevel, type RlsNode, type RlsRule, ruleOf } from './rls-rules.js';

/** A configuration that cannot be loaded; the message names the file, the domain and the descriptor. */
export class RlsConfigError extends Error {
  override name = 'RlsConfigError';
}

/** No QUOTA_RLS_CONFIG: no domain, so every request is answered OK without a limit. */
export const EMPTY_RLS_CONFIG: RlsConfig = Object.freeze({ domains: new Map() });

/** The texts a configuration is made of, by file path (one file, or the YAML files of a directory). */
export type RlsTexts = ReadonlyMap<string, string>;

/**
 * Reads QUOTA_RLS_CONFIG: one YAML file, or every `*.yaml` / `*.yml` file of a
 * directory (not its subdirectories, not names starting with a dot: a
 * Kubernetes ConfigMap volume's `..data` and its timestamped copies).
 */
export async function readRlsTexts(path: string): Promise<RlsTexts> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(path)).isDirectory();
  } catch (error) {
    throw new RlsConfigError(`cannot read ${path}: ${(error as Error).message}`);
  }
  const files = isDirectory
    ? (await readdir(path))
        .filter((name) => !name.startsWith('.') && /\.ya?ml$/.test(name))
        .sort()
        .map((name) => join(path, name))
    : [path];
  const texts = new Map<string, string>();
  for (const file of files) {
    try {
      // A directory entry may be a symlink to a file (a ConfigMap volume) or a directory: only files count.
      if (isDirectory && !(await stat(file)).isFile()) continue;
      texts.set(file, await readFile(file, 'utf8'));
    } catch (error) {
      throw new RlsConfigError(`cannot read ${file}: ${(error as Error).message}`);
    }
  }
  return texts;
}

/** The configuration of all files; every problem of every file is listed, each naming its file, domain and descriptor. */
export function parseRlsConfig(texts: RlsTexts): RlsConfig {
  const domains = new Map<string, RlsDomain>();
  const problems: string[] = [];
  for (const [file, text] of texts) {
    const name = basename(file);
    let domain: RlsDomain;
    try {
      domain = parseRlsFile(text, name);
    } catch (error) {
      problems.push((error as Error).message);
      continue;
    }
    const first = domains.get(domain.name);
    if (first !== undefined) problems.push(`${name}: domain "${domain.name}" is also configured in ${first.file}; a domain lives in one file`);
    else domains.set(domain.name, domain);
  }
  if (problems.length > 0) throw new RlsConfigError(problems.join('\n'));
  return Object.freeze({ domains });
}

/** One file's domain; a problem is an RlsConfigError naming the file, the domain and the descriptor path. */
export function parseRlsFile(text: string, file: string): RlsDomain {
  const lines = new LineCounter();
  let document: Document.Parsed;
  let raw: unknown;
  try {
    document = parseYaml(text, { lineCounter: lines });
    raw = yamlValue(document);
  } catch (error) {
    if (error instanceof YamlTextError) throw new RlsConfigError(`${file}: invalid YAML: ${error.message}`);
    throw error;
  }
  const parsed = rlsFileSchema.safeParse(raw);
  if (!parsed.success) throw new RlsConfigError(describeIssues(file, raw, parsed.error, (path, key) => lineOf(document, lines, path, key)));
  const config = parsed.data;
  const problems: string[] = [];
  const root = buildNode(config.domain, config.descriptors, [], [], [], [], file, problems);
  if (problems.length > 0) throw new RlsConfigError(problems.join('\n'));
  const failure = Object.freeze({ mode: config.failure_mode, localShare: config.local_share ?? 1 });
  return Object.freeze({ name: config.domain, file, root, policy: domainPolicy(config.domain, failure) });
}

/**
 * One level of descriptors. `names` are the envoyproxy-style stats keys of
 * the levels above (`key_value`), `segments` their key-path segments, `at`
 * their places in the file (`descriptors[0].descriptors[2]`).
 */
function buildNode(
  domain: string,
  definitions: readonly DescriptorDefinition[],
  names: readonly string[],
  segments: readonly string[],
  at: readonly string[],
  levels: readonly RlsLevel[],
  file: string,
  problems: string[],
): RlsNode {
  const exact = new Map<string, RlsEntry>();
  const byKey = new Map<string, RlsEntry>();
  const wildcards: { key: string; pattern: RegExp; entry: RlsEntry }[] = [];
  const seen = new Set<string>();
  definitions.forEach((definition, index) => {
    const place = [...at, `descriptors[${index}]`];
    const name = definition.value === undefined ? definition.key : `${definition.key}_${definition.value}`;
    const path = [...names, name].join('.');
    const where = `${file}: domain "${domain}": descriptor ${JSON.stringify(path)} (${place.join('.')})`;
    const composite = `${definition.key}\u0000${definition.value ?? ''}`;
    if (seen.has(composite)) problems.push(`${where}: the same key and value twice at one level`);
    seen.add(composite);
    const segment = pathSegment(definition.key, definition.value);
    const level: RlsLevel = Object.freeze({
      key: definition.key,
      value: definition.value,
      wildcard: definition.value?.includes('*') === true,
      valueToMetric: definition.value_to_metric,
      share: definition.share_threshold,
    });
    const down = [...levels, level];
    const rule = ruleOf(domain, definition, path, [...segments, segment].join('/'), down);
    if (rule !== undefined) checkRule(rule, where, problems);
    const children =
      definition.descriptors.length === 0
        ? undefined
        : buildNode(domain, definition.descriptors, [...names, name], [...segments, segment], place, down, file, problems);
    const entry: RlsEntry = Object.freeze({ rule, children });
    if (definition.value === undefined) byKey.set(definition.key, entry);
    else if (definition.value.includes('*')) wildcards.push({ key: definition.key, pattern: globPattern(definition.value), entry });
    else exact.set(composite, entry);
  });
  return Object.freeze({ exact, wildcards, byKey });
}

function checkRule(rule: RlsRule, where: string, problems: string[]): void {
  if (rule.replaces.includes(rule.name)) problems.push(`${where}: replaces names the rule's own name "${rule.name}"`);
}

/** `*` matches any run of characters (none included); everything else matches itself. */
export function globPattern(value: string): RegExp {
  const escaped = value
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[\\s\\S]*');
  return new RegExp(`^${escaped}$`);
}

/**
 * The line (from 1) of the node at `path` in the file, or of its entry `key`
 * when given (an unknown key); the nearest enclosing node that has one.
 */
function lineOf(document: Document, lines: LineCounter, path: readonly PropertyKey[], key: string | undefined): number | undefined {
  for (let depth = path.length; depth >= 0; depth--) {
    const node = depth === 0 ? document.contents : document.getIn(path.slice(0, depth) as unknown[], true);
    if (depth === path.length && key !== undefined && isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && item.key.value === key);
      if (pair !== undefined && isNode(pair.key) && pair.key.range) return lines.linePos(pair.key.range[0]).line;
    }
    if (isNode(node) && node.range) return lines.linePos(node.range[0]).line;
  }
  return undefined;
}

/** zod's issues, one line each, with the descriptor they are in named as envoyproxy/ratelimit names it, and the line. */
function describeIssues(
  file: string,
  raw: unknown,
  error: z.ZodError,
  lineAt: (path: readonly PropertyKey[], key: string | undefined) => number | undefined,
): string {
  const domain = typeof raw === 'object' && raw !== null && typeof (raw as RlsFile).domain === 'string' ? `domain "${(raw as RlsFile).domain}"` : 'no domain';
  return error.issues
    .map((issue) => {
      let node: unknown = raw;
      const names: string[] = [];
      const place: string[] = [];
      let rest = 0;
      const path = issue.path;
      // Walk descriptors[i].descriptors[j]... as far as the path goes through descriptors.
      while (rest + 1 < path.length && path[rest] === 'descriptors' && typeof path[rest + 1] === 'number') {
        const list = (node as { descriptors?: unknown[] } | undefined)?.descriptors;
        node = Array.isArray(list) ? list[path[rest + 1] as number] : undefined;
        const d = node as { key?: unknown; value?: unknown } | undefined;
        names.push(d?.value === undefined ? String(d?.key ?? '?') : `${String(d?.key ?? '?')}_${String(d.value)}`);
        place.push(`descriptors[${String(path[rest + 1])}]`);
        rest += 2;
      }
      const field = path
        .slice(rest)
        .map((segment) => (typeof segment === 'number' ? `[${segment}]` : `.${String(segment)}`))
        .join('')
        .replace(/^\./, '');
      const where = names.length === 0 ? '' : ` descriptor ${JSON.stringify(names.join('.'))} (${place.join('.')})`;
      const unknownKey = issue.code === 'unrecognized_keys' ? issue.keys[0] : undefined;
      const line = lineAt(path, unknownKey);
      return `${file}: ${domain}:${where} ${field || (names.length === 0 ? '(file)' : '(descriptor)')}: ${issue.message}${line === undefined ? '' : ` (line ${line})`}`;
    })
    .join('\n');
}
