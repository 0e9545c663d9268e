// Every .Values path a template names exists in values.yaml and in the schema, and every
// value in values.yaml is used by some template (no dead settings). The paths are read
// from the template text; a value used only through `with`/`range` on `.` would not be
// seen, so the templates always spell `.Values.<path>` out.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultValues, isMap, readChartFile, templateFiles, valueAt, valuesPaths } from './chart.js';

const schema = JSON.parse(readChartFile('values.schema.json')) as Record<string, unknown>;

/** The schema node for a dotted values path, or undefined when the schema does not describe it. */
function schemaAt(path: string): unknown {
  let node: unknown = schema;
  for (const key of path.split('.')) {
    if (!isMap(node) || !isMap(node.properties) || !(key in node.properties)) return undefined;
    node = node.properties[key];
  }
  return node;
}

/** Dotted paths of the leaves of values.yaml (an empty map or list is a leaf). */
function leafPaths(values: unknown, prefix = ''): string[] {
  if (!isMap(values) || Object.keys(values).length === 0) return [prefix];
  return Object.entries(values).flatMap(([key, value]) => leafPaths(value, prefix ? `${prefix}.${key}` : key));
}

const usedPaths = (texts: string[]): string[] => [...new Set(texts.flatMap(valuesPaths))].sort();
const templateTexts = (): string[] => templateFiles().map((file) => readChartFile(join('templates', file)));

/** Leaves of values.yaml that no template reads, neither itself nor an enclosing map (toYaml .Values.resources). */
function unusedValues(values: unknown, texts: string[]): string[] {
  const used = usedPaths(texts);
  return leafPaths(values).filter((leaf) => !used.some((path) => leaf === path || leaf.startsWith(`${path}.`)));
}

/** Paths templates name that values.yaml or the schema lack. */
function missingPaths(texts: string[]): string[] {
  const values = defaultValues();
  return usedPaths(texts).filter((path) => valueAt(values, path) === undefined || schemaAt(path) === undefined);
}

describe('.Values paths', () => {
  it('the templates name a plausible number of paths (the extraction works)', () => {
    const used = usedPaths(templateTexts());
    expect(used).toContain('grpc.port');
    expect(used).toContain('redis.tls.enabled');
    expect(used.length).toBeGreaterThan(50);
  });

  it('every path a template names exists in values.yaml and in values.schema.json', () => {
    expect(missingPaths(templateTexts())).toEqual([]);
  });

  it('a bogus path in a template is caught', () => {
    const texts = templateTexts();
    texts.push('replicas: {{ .Values.foo.bar }}', 'x: {{ $.Values.redis.tlz.enabled }}');
    expect(missingPaths(texts)).toEqual(['foo.bar', 'redis.tlz.enabled']);
  });

  it('a path in values.yaml that the schema does not describe is caught', () => {
    expect(schemaAt('redis.tls.caKey')).toBeDefined();
    expect(schemaAt('redis.tls.cakey')).toBeUndefined();
  });

  it('every value in values.yaml is used by a template (itself or an enclosing map, e.g. toYaml .Values.resources)', () => {
    expect(unusedValues(defaultValues(), templateTexts())).toEqual([]);
  });

  it('the unused-value check catches a value no template reads', () => {
    const values = defaultValues();
    (values.config as Record<string, unknown>).verbose = true;
    expect(unusedValues(values, templateTexts())).toEqual(['config.verbose']);
  });
});
