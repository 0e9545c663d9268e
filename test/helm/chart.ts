// Reading the Helm chart's files as text and YAML, for the static checks: the static
// YAML structure of each template (with every {{ ... }} action blanked out), which
// .Values paths the templates name, and the values files themselves. The rendered
// output (conditionals, include, toYaml) is checked with a real helm in rendered.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

export const CHART_DIR = join(import.meta.dirname, '..', '..', 'helm', 'quota-service');
export const REPO_DIR = join(import.meta.dirname, '..', '..');

export const readChartFile = (path: string): string => readFileSync(join(CHART_DIR, path), 'utf8');

export type Values = Record<string, unknown>;

export const defaultValues = (): Values => parse(readChartFile('values.yaml')) as Values;

export const ciValueFiles = (): string[] =>
  readdirSync(join(CHART_DIR, 'ci'))
    .filter((name) => name.endsWith('.yaml'))
    .sort();

/** Helm's merge of a values file over values.yaml: maps merge key by key, anything else replaces. */
export function mergeValues(base: unknown, override: unknown): unknown {
  if (isMap(base) && isMap(override)) {
    const merged: Record<string, unknown> = { ...base };
    for (const [key, value] of Object.entries(override)) merged[key] = key in base ? mergeValues(base[key], value) : value;
    return merged;
  }
  return override;
}

/** values.yaml alone (named "values.yaml"), then each ci/ file merged over it, as helm would see them. */
export function valueSets(): { name: string; values: Values }[] {
  const defaults = defaultValues();
  return [
    { name: 'values.yaml', values: defaults },
    ...ciValueFiles().map((name) => ({ name: `ci/${name}`, values: mergeValues(defaults, parse(readChartFile(join('ci', name)))) as Values })),
  ];
}

export const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The value at a dotted path (`redis.tls.enabled`), or undefined. */
export function valueAt(values: unknown, path: string): unknown {
  let node = values;
  for (const key of path.split('.')) {
    if (!isMap(node) || !(key in node)) return undefined;
    node = node[key];
  }
  return node;
}

export const templateFiles = (): string[] => readdirSync(join(CHART_DIR, 'templates')).sort();

/** Every `.Values.a.b` (or `$.Values.a.b`) path named in a template text, without the `.Values.` prefix. */
export function valuesPaths(text: string): string[] {
  return [...new Set([...text.matchAll(/\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)].map((match) => match[1]!.slice(1)))].sort();
}

/**
 * The template's static YAML: comment actions removed, lines that hold only actions
 * (if/else/end/with/range, include or toYaml with nindent) dropped, an inline
 * `{{ .Values.a.b }}` replaced by the marker `<<.Values.a.b>>` (so a test can see
 * which value lands where), any other inline action by `TEMPLATED`. Both branches of
 * an if/else stay, so later duplicate keys win (uniqueKeys off).
 */
export function staticYaml(text: string): string {
  return text
    .replace(/\{\{-?\s*\/\*[\s\S]*?\*\/\s*-?\}\}/g, '')
    .split('\n')
    .filter((line) => !/^\s*(\{\{-?[^}]*-?\}\}\s*)+$/.test(line))
    .map((line) => line.replace(/\{\{-?\s*(\.Values(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*-?\}\}/g, '<<$1>>').replace(/\{\{-?[\s\S]*?-?\}\}/g, 'TEMPLATED'))
    .join('\n');
}

/** The one Kubernetes object a template file holds, parsed from its static YAML. */
export function templateObject(file: string): Record<string, unknown> {
  return parseTemplate(readChartFile(join('templates', file)), file);
}

/** The one object of a template's text (see templateObject); throws naming the file. */
export function parseTemplate(text: string, file: string): Record<string, unknown> {
  const documents = parseAllDocuments(staticYaml(text), { uniqueKeys: false });
  const objects = documents.filter((document) => document.contents !== null);
  if (objects.length !== 1) throw new Error(`${file}: expected one YAML document, found ${objects.length}`);
  const [document] = objects;
  if (document!.errors.length > 0) throw new Error(`${file}: ${document!.errors[0]!.message}`);
  const object = document!.toJS() as unknown;
  if (!isMap(object)) throw new Error(`${file}: not a mapping`);
  return object;
}

/** The body of a named `define` block of templates/_helpers.tpl (nested if/with/range blocks included). */
export function helperBody(name: string): string {
  const helpers = readChartFile(join('templates', '_helpers.tpl'));
  const opener = `{{- define "${name}" -}}`;
  const start = helpers.indexOf(opener);
  if (start < 0) throw new Error(`no helper ${name}`);
  let depth = 0;
  for (const match of helpers.slice(start).matchAll(/\{\{-?\s*(if|with|range|define|end)\b[^}]*\}\}/g)) {
    depth += match[1] === 'end' ? -1 : 1;
    if (depth === 0) return helpers.slice(start + opener.length, start + match.index).trim();
  }
  throw new Error(`helper ${name} has no matching end`);
}

/**
 * Evaluates the integer arithmetic of a sprig expression as helm would:
 * `add`, `sub`, `mul`, `div` (integer), `max`, `min` over `.Values` paths, integers
 * and parentheses, e.g. `add .Values.a (div (add .Values.b 999) 1000)`.
 */
export function evaluateArithmetic(expression: string, values: Values): number {
  const inner = expression.replace(/^\{\{-?\s*/, '').replace(/\s*-?\}\}$/, '');
  const tokens = inner.match(/\(|\)|[^\s()]+/g) ?? [];
  let position = 0;
  const next = () => tokens[position++];
  const term = (): number => {
    const token = next();
    if (token === '(') {
      const value = call(next()!);
      if (next() !== ')') throw new Error(`unbalanced parentheses in ${expression}`);
      return value;
    }
    if (token === undefined) throw new Error(`unexpected end of ${expression}`);
    if (/^-?\d+$/.test(token)) return Number(token);
    if (token.startsWith('.Values.')) {
      const value = valueAt(values, token.slice('.Values.'.length));
      if (typeof value !== 'number') throw new Error(`${token} is not a number`);
      return Math.trunc(value);
    }
    throw new Error(`unknown token ${token} in ${expression}`);
  };
  const call = (name: string): number => {
    const args: number[] = [];
    while (position < tokens.length && tokens[position] !== ')') args.push(term());
    switch (name) {
      case 'add':
        return args.reduce((a, b) => a + b, 0);
      case 'sub':
        return args[0]! - args[1]!;
      case 'mul':
        return args.reduce((a, b) => a * b, 1);
      case 'div':
        return Math.trunc(args[0]! / args[1]!);
      case 'max':
        return Math.max(...args);
      case 'min':
        return Math.min(...args);
      default:
        throw new Error(`unknown function ${name} in ${expression}`);
    }
  };
  const value = call(next()!);
  if (position !== tokens.length) throw new Error(`trailing tokens in ${expression}`);
  return value;
}
