import { type Document, isAlias, isDocument, isMap, isPair, isSeq, Lexer, type LineCounter, type Node, Parser, parseDocument } from 'yaml';

/**
 * The limits of every YAML text read: the policy file (and ValidatePolicies),
 * the callers file, Envoy's rate limit configuration. Within them a text is
 * read in time and memory proportional to its length; beyond them it is
 * refused with a message, never expanded or recursed into.
 */
export const YAML_LIMITS = Object.freeze({
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
  checkNesting(text);
  const document = parseDocument(text, {
    prettyErrors: options.prettyErrors ?? false,
    ...(options.lineCounter === undefined ? {} : { lineCounter: options.lineCounter }),
  });
  if (document.errors.length > 0) {
    throw new YamlTextError(document.errors.map((error) => ({ message: error.message, line: error.linePos?.[0]?.line ?? lineAt(text, error.pos[0]) })));
  }
  checkAliases(document, text);
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
 * Depth counting what aliases stand for, and no alias inside the node it names
 * (which would make a value that contains itself). Nodes are visited in the
 * document's order, so an alias's anchor is done before the alias, unless the
 * alias is inside it.
 */
function checkAliases(document: Document.Parsed, text: string): void {
  const depths = new Map<unknown, number>();
  const depthOf = (node: unknown): number => {
    if (node === null || node === undefined) return 0;
    if (isAlias(node)) {
      const target = node.resolve(document);
      const depth = depths.get(target);
      if (depth === undefined) {
        const line = lineAt(text, node.range?.[0] ?? 0);
        throw new YamlLimitError([{ message: `line ${line}: an alias inside the node it refers to (a value that contains itself)`, line }]);
      }
      return depth;
    }
    let depth = 0;
    if (isMap(node) || isSeq(node)) {
      for (const item of node.items) {
        const inner = isPair(item) ? Math.max(depthOf(item.key), depthOf(item.value)) : depthOf(item);
        depth = Math.max(depth, inner + 1);
      }
      if (depth > YAML_LIMITS.maxDepth) throw tooDeep(text, node.range?.[0] ?? 0);
    }
    depths.set(node, depth);
    return depth;
  };
  depthOf(isDocument(document) ? document.contents : null);
}
