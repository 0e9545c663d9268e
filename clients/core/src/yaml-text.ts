import {
  type Document,
  isAlias,
  isDocument,
  isMap,
  isPair,
  isScalar,
  isSeq,
  Lexer,
  type LineCounter,
  type Node,
  Parser,
  parseDocument,
  type Scalar,
} from 'yaml';

/**
 * The limits of every YAML text read: the policy file (and ValidatePolicies),
 * the callers file, Envoy's rate limit configuration. Within them a text is
 * read in time and memory proportional to its length; beyond them it is
 * refused with a message, never expanded or recursed into.
 */
export const YAML_LIMITS = Object.freeze({
  /** Characters of one text (1 MiB): far more than a file of a thousand policies needs. */
  maxLength: 1_048_576,
  /** Collections inside collections, counting what aliases stand for. The files need a handful of levels. */
  maxDepth: 64,
  /**
   * What aliases may expand to, as the yaml package counts it (its `maxAliasCount`, default
   * 100): a few anchors reused a few times pass; a "billion laughs" (aliases of aliases of
   * aliases) is refused before it is expanded.
   */
  maxAliasCount: 100,
});

/** A text that is not valid YAML: the yaml package's messages, each with its line when known. */
export class YamlTextError extends Error {
  override name = 'YamlTextError';
  constructor(readonly problems: readonly { readonly message: string; readonly line: number | undefined }[]) {
    super(problems.map((problem) => problem.message).join('; '));
  }
}

/** Valid YAML beyond YAML_LIMITS. Its message holds no text of the file, only where and which limit. */
export class YamlLimitError extends YamlTextError {
  override name = 'YamlLimitError';
}

/**
 * One YAML document, parsed within YAML_LIMITS; throws YamlTextError (or
 * YamlLimitError) when it is not valid or not within them. Read its values with
 * yamlValue, which keeps the alias limit.
 */
export function parseYaml(text: string, options: { lineCounter?: LineCounter; prettyErrors?: boolean } = {}): Document.Parsed {
  if (text.length > YAML_LIMITS.maxLength) {
    throw new YamlLimitError([{ message: `${text.length} characters, more than the ${YAML_LIMITS.maxLength} allowed`, line: undefined }]);
  }
  checkNesting(text);
  const document = parseDocument(text, {
    // The yaml package compares each key with every other key of its mapping, which takes
    // minutes for a mapping of a hundred thousand keys: checkStructure finds duplicates instead.
    uniqueKeys: false,
    prettyErrors: options.prettyErrors ?? false,
    ...(options.lineCounter === undefined ? {} : { lineCounter: options.lineCounter }),
  });
  if (document.errors.length > 0) {
    throw new YamlTextError(document.errors.map((error) => ({ message: error.message, line: error.linePos?.[0]?.line ?? lineAt(text, error.pos[0]) })));
  }
  checkStructure(document, text);
  return document;
}

/** The plain value of a parsed document or of one of its nodes, its aliases expanded within YAML_LIMITS.maxAliasCount. */
export function yamlValue(document: Document.Parsed, node?: Node | null): unknown {
  try {
    if (node === undefined) return document.toJS({ maxAliasCount: YAML_LIMITS.maxAliasCount });
    return node === null ? null : node.toJS(document, { maxAliasCount: YAML_LIMITS.maxAliasCount });
  } catch (error) {
    if (!(error instanceof ReferenceError)) throw error;
    throw new YamlLimitError([
      { message: `its aliases expand to more than the ${YAML_LIMITS.maxAliasCount} nodes allowed (the shape of an "alias bomb")`, line: undefined },
    ]);
  }
}

const lineAt = (text: string, offset: number): number => {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
};

const tooDeep = (text: string, offset: number) =>
  new YamlLimitError([{ message: `line ${lineAt(text, offset)}: nested more than ${YAML_LIMITS.maxDepth} levels deep`, line: lineAt(text, offset) }]);

/**
 * The nesting as the yaml package's parser builds it, stopped at the first level too
 * deep: composing a document recurses once per level, and a text of brackets alone
 * would otherwise take seconds, or the whole stack.
 */
function checkNesting(text: string): void {
  const parser = new Parser();
  for (const lexeme of new Lexer().lex(text)) {
    for (const _ of parser.next(lexeme)) {
      // Documents and errors come again from parseDocument: only the depth counts here.
    }
    // The stack holds the document and each open collection, and a little more; checkAliases counts exactly.
    if (parser.stack.length > YAML_LIMITS.maxDepth + 8) throw tooDeep(text, parser.offset);
  }
}

/**
 * Depth counting what aliases stand for, no alias inside the node it names
 * (which would make a value that contains itself), and no key twice in a
 * mapping. Nodes are visited in the document's order, so an alias's anchor is
 * done before the alias, unless the alias is inside it.
 */
function checkStructure(document: Document.Parsed, text: string): void {
  const depths = new Map<unknown, number>();
  const depthOf = (node: unknown): number => {
    if (node === null || node === undefined) return 0;
    if (isAlias(node)) {
      const depth = depths.get(node.resolve(document));
      if (depth === undefined) {
        const line = lineAt(text, node.range?.[0] ?? 0);
        throw new YamlLimitError([{ message: `line ${line}: an alias inside the node it refers to (a value that contains itself)`, line }]);
      }
      return depth;
    }
    let depth = 0;
    if (isMap(node) || isSeq(node)) {
      const keys = isMap(node) ? new Set<string>() : undefined;
      for (const item of node.items) {
        const inner = isPair(item) ? Math.max(depthOf(item.key), depthOf(item.value)) : depthOf(item);
        depth = Math.max(depth, inner + 1);
        if (keys !== undefined && isPair(item) && isScalar(item.key)) checkUnique(keys, item.key, text);
      }
      if (depth > YAML_LIMITS.maxDepth) throw tooDeep(text, node.range?.[0] ?? 0);
    }
    depths.set(node, depth);
    return depth;
  };
  depthOf(isDocument(document) ? document.contents : null);
}

/** As the yaml package's own check (uniqueKeys): scalar keys with equal values (1 and "1" differ). */
function checkUnique(keys: Set<string>, key: Scalar, text: string): void {
  const value = key.value;
  const id = `${value === null ? 'null' : typeof value}:${String(value)}`;
  if (!keys.has(id)) {
    keys.add(id);
    return;
  }
  const line = lineAt(text, key.range?.[0] ?? 0);
  throw new YamlTextError([{ message: `Map keys must be unique at line ${line}`, line }]);
}
