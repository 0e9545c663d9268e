import type { RlsEntry, RlsNode, RlsRule } from './rls-rules.js';

/** A descriptor's entries, as Envoy sends them. */
export interface Entry {
  readonly key: string;
  readonly value: string;
}

/**
 * The rule a descriptor matches, as envoyproxy/ratelimit matches: entry by
 * entry down the domain's tree, at each level the entry with the same key
 * and value, else the first (in file order) with the same key whose
 * wildcard value matches, else the one with the key alone. A rule applies
 * only at the descriptor's last entry: a descriptor with more entries than
 * the configuration has levels, or with fewer, matches nothing. Pure: no
 * I/O, no state.
 */
export function matchRule(root: RlsNode, entries: readonly Entry[]): RlsRule | undefined {
  let node: RlsNode | undefined = root;
  for (let i = 0; i < entries.length && node !== undefined; i++) {
    const { key, value } = entries[i]!;
    const next: RlsEntry | undefined =
      node.exact.get(`${key}\u0000${value}`) ?? node.wildcards.find((w) => w.key === key && w.pattern.test(value))?.entry ?? node.byKey.get(key);
    if (next === undefined) return undefined;
    if (i === entries.length - 1) return next.rule;
    node = next.children;
  }
  return undefined;
}
