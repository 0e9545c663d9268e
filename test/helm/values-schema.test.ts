// values.schema.json (what helm install/lint/template enforce) against values.yaml and
// the ci/ examples, with a JSON-schema validator (ajv, draft-07 like helm).
import { Ajv, type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { isMap, mergeValues, readChartFile, valueSets, type Values } from './chart.js';

const schema = JSON.parse(readChartFile('values.schema.json')) as Record<string, unknown>;

function compile(): ValidateFunction {
  // strict: an unknown keyword or a misspelt one in the schema is an error, not ignored.
  return new Ajv({ strict: true, allowUnionTypes: true, allErrors: true }).compile(schema);
}

const validate = compile();
const errorsOf = (values: unknown): string[] =>
  validate(values) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? ''} ${JSON.stringify(error.params)}`);
const base = valueSets()[0]!.values;
const withOverride = (override: unknown): Values => mergeValues(base, override) as Values;

/** Schema nodes that describe Kubernetes types the chart passes through to the API server unchanged. */
const PASSTHROUGH = ['affinity', 'extraEnv[].valueFrom', 'networkPolicy.metricsFrom[]', 'tolerations[]', 'topologySpreadConstraints[]'];

describe('values.schema.json', () => {
  it('is a draft-07 schema that compiles in strict mode', () => {
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(() => compile()).not.toThrow();
  });

  it('closes every object (additionalProperties false), except string maps and the listed Kubernetes passthrough types', () => {
    const open: string[] = [];
    const passthrough: string[] = [];
    const walk = (node: unknown, path: string) => {
      if (!isMap(node)) return;
      if (node.type === 'object') {
        const additional = node.additionalProperties;
        const stringMap = isMap(additional) && additional.type === 'string' && node.properties === undefined;
        if (typeof node.$comment === 'string' && node.$comment.startsWith('passthrough:')) passthrough.push(path.slice(1));
        else if (additional !== false && !stringMap) open.push(path || '/');
      }
      if (isMap(node.properties)) for (const [key, child] of Object.entries(node.properties)) walk(child, `${path}.${key}`);
      if (node.items !== undefined) walk(node.items, `${path}[]`);
      for (const key of ['allOf', 'anyOf', 'oneOf'])
        if (Array.isArray(node[key])) (node[key] as unknown[]).forEach((child, i) => walk(child, `${path}.${key}${i}`));
    };
    walk(schema, '');
    expect(open).toEqual([]);
    expect(passthrough.sort()).toEqual(PASSTHROUGH);
  });

  it.each(valueSets().map(({ name, values }) => [name, values] as const))('accepts %s', (_name, values) => {
    expect(errorsOf(values)).toEqual([]);
  });

  it.each([
    ['an unknown top-level key', { replicas: 3 }, /must NOT have additional properties.*"replicas"/],
    ['an unknown nested key (a typo)', { redis: { hots: 'redis' } }, /\/redis must NOT have additional properties.*"hots"/],
    ['a string where a number belongs', { grpc: { port: '50051' } }, /\/grpc\/port must be integer/],
    ['a port out of range', { metrics: { port: 70000 } }, /\/metrics\/port must be <= 65535/],
    ['an unknown redis mode', { redis: { mode: 'sentinel' } }, /\/redis\/mode must be equal to one of the allowed values/],
    ['an unknown log level', { config: { logLevel: 'verbose' } }, /\/config\/logLevel must be equal to one of the allowed values/],
    ['a drain longer than the service allows', { config: { shutdownGraceMs: 600_001 } }, /\/config\/shutdownGraceMs must be <= 600000/],
    ['a seed that is not host:port', { redis: { mode: 'cluster', seeds: ['redis://node-1'] } }, /\/redis\/seeds\/0 must match pattern/],
    [
      'a QUOTA_* name in extraEnv (each has its own value)',
      { extraEnv: [{ name: 'QUOTA_LOG_LEVEL', value: 'debug' }] },
      /\/extraEnv\/0\/name must NOT be valid/,
    ],
    ['a non-string label value', { podLabels: { team: 7 } }, /\/podLabels\/team must be string/],
    ['an unknown securityContext field', { securityContext: { readOnlyRootFileSystem: true } }, /\/securityContext must NOT have additional properties/],
  ])('rejects %s', (_what, override, message) => {
    expect(errorsOf(withOverride(override)).join('\n')).toMatch(message);
  });

  // Settings incomplete without another value (no Redis host, auth without callers, ...)
  // are refused by templates/_validate.tpl, naming the value to set: validation.test.ts.
  it('accepts settings that combine values (their checks are in templates/_validate.tpl)', () => {
    expect(errorsOf(withOverride({ redis: { mode: 'cluster', seeds: ['10.0.0.1:6379', '[fd00::1]:6379'] } }))).toEqual([]);
    expect(errorsOf(withOverride({ redis: { mode: 'single', host: '', existingSecret: 'quota-redis' } }))).toEqual([]);
    expect(errorsOf(withOverride({ auth: { enabled: true, existingSecret: 'quota-callers' } }))).toEqual([]);
    expect(errorsOf(withOverride({ tls: { enabled: true, secretName: 'quota-tls' } }))).toEqual([]);
    expect(errorsOf(withOverride({ redis: { tls: { enabled: true, caSecret: 'redis-ca', clientCertSecret: 'redis-client' } } }))).toEqual([]);
    expect(errorsOf(withOverride({ redis: { existingSecret: 'quota-redis', tls: { caSecret: 'redis-ca' } } }))).toEqual([]);
    expect(errorsOf(withOverride({ extraEnv: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=192' }] }))).toEqual([]);
  });
});
