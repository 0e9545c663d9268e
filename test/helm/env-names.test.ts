// The environment the Deployment gives the container against what the service reads:
// the names come from the service's own zod schema (src/config/env.ts), not from a list
// copied here, and the values each values file would produce are run through it.
import { describe, expect, it } from 'vitest';
import { parseCallers } from '../../src/config/callers.js';
import { envSchema } from '../../src/config/env.js';
import { parsePolicies } from '@quota-service/core';
import { readChartFile, templateObject, valueAt, valueSets, type Values } from './chart.js';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

function containerEnv(): EnvVar[] {
  const deployment = templateObject('deployment.yaml') as { spec: { template: { spec: { containers: { env: EnvVar[] }[] } } } };
  const [container] = deployment.spec.template.spec.containers;
  return container!.env;
}

/** Variables the chart sets that the service does not read itself, each for a reason. */
const NOT_THE_SERVICE = {};

/** Variables the chart fixes (the chart owns the mount or the bind address); the rest come from values. */
const FIXED_BY_CHART = [
  'QUOTA_POLICIES',
  'QUOTA_AUTH_TOKENS',
  'QUOTA_RLS_CONFIG',
  'QUOTA_TLS_CERT',
  'QUOTA_TLS_KEY',
  'QUOTA_REDIS_TLS_CERT',
  'QUOTA_REDIS_TLS_KEY',
];

const quotaNames = (env: EnvVar[]) => env.map(({ name }) => name).filter((name) => name.startsWith('QUOTA_'));

/**
 * `- name: QUOTA_X` followed by `value: {{ .Values.a.b | int | quote }}` (or `| quote`):
 * the variables whose value is one values path, as the template spells them.
 */
function directMappings(deploymentText: string): Map<string, string> {
  const pattern = /- name: (QUOTA_[A-Z_]+)\n\s+value: \{\{ \.Values\.([A-Za-z0-9_.]+)(?: \| int)? \| quote \}\}/g;
  return new Map([...deploymentText.matchAll(pattern)].map((match) => [match[1]!, match[2]!]));
}

/**
 * The QUOTA_* values a values set produces for the variables whose value is static or
 * one path. Conditionals are not evaluated (static parse): every branch's variables are
 * here, e.g. the TLS paths even with TLS off; the Redis connection (from a Secret) is not.
 */
function renderedEnv(values: Values): Record<string, string> {
  const deploymentText = readChartFile('templates/deployment.yaml');
  const env: Record<string, string> = {};
  for (const [name, path] of directMappings(deploymentText)) env[name] = String(valueAt(values, path));
  for (const { name, value } of containerEnv()) {
    if (!name.startsWith('QUOTA_') || value === undefined || name in env) continue;
    // `"0.0.0.0:<<.Values.grpc.port>>"`: substitute the one path; TEMPLATED means more than that.
    if (value.includes('TEMPLATED')) continue;
    env[name] = value.replace(/<<\.Values\.([A-Za-z0-9_.]+)>>/g, (_, path: string) => String(valueAt(values, path)));
  }
  return env;
}

/**
 * The Redis part of the environment, which the static parse cannot give: the connection
 * string comes from a Secret (a stand-in of the scheme the values select) and the Redis
 * TLS files are set only when their Secrets are (the service refuses them next to a
 * plain redis:// connection).
 */
function withRedisAsConfigured(env: Record<string, string>, values: Values): Record<string, string> {
  const out = { ...env };
  const tls = valueAt(values, 'redis.tls.enabled') === true;
  const mode = valueAt(values, 'redis.mode');
  const scheme = tls ? 'rediss' : 'redis';
  if (mode === 'single') out.QUOTA_REDIS_URL = `${scheme}://redis.example:6379`;
  if (mode === 'cluster') out.QUOTA_REDIS_CLUSTER = `${scheme}://redis-0.example:6379,${scheme}://redis-1.example:6379`;
  if (valueAt(values, 'redis.tls.caSecret') === '') delete out.QUOTA_REDIS_TLS_CA;
  if (valueAt(values, 'redis.tls.clientCertSecret') === '') {
    delete out.QUOTA_REDIS_TLS_CERT;
    delete out.QUOTA_REDIS_TLS_KEY;
  }
  return out;
}

describe('Deployment environment', () => {
  const serviceNames = Object.keys(envSchema.shape).sort();

  it('sets every variable the service reads, and no QUOTA_* variable it does not read', () => {
    expect([...new Set(quotaNames(containerEnv()))].sort()).toEqual(serviceNames);
  });

  it('turns off service links, which would add QUOTA_*_PORT variables for Services named quota-*', () => {
    const deployment = templateObject('deployment.yaml') as { spec: { template: { spec: { enableServiceLinks?: unknown } } } };
    expect(deployment.spec.template.spec.enableServiceLinks).toBe(false);
  });

  it('sets nothing else but the listed non-service variables', () => {
    const others = containerEnv()
      .map(({ name }) => name)
      .filter((name) => !name.startsWith('QUOTA_'));
    expect(others.sort()).toEqual(Object.keys(NOT_THE_SERVICE).sort());
  });

  it('the name check fails on a misspelt or an extra variable', () => {
    const env = [...containerEnv(), { name: 'QUOTA_SHUTDOWN_GRACE', value: '1' }];
    expect([...new Set(quotaNames(env))].sort()).not.toEqual(serviceNames);
    const missing = containerEnv().filter(({ name }) => name !== 'QUOTA_BREAKER_FAILURES');
    expect([...new Set(quotaNames(missing))].sort()).not.toEqual(serviceNames);
  });

  it('takes every variable from values except the paths the chart owns (mount points)', () => {
    const env = containerEnv();
    for (const name of FIXED_BY_CHART) expect(env.find((variable) => variable.name === name)?.value, name).toMatch(/^\/etc\/quota\//);
    const mapped = directMappings(readChartFile('templates/deployment.yaml'));
    const fromValues = serviceNames.filter((name) => !FIXED_BY_CHART.includes(name));
    for (const name of fromValues) {
      const variable = env.find((candidate) => candidate.name === name)!;
      const source = mapped.get(name) ?? variable.value ?? '';
      // A values path, a port or key from values (QUOTA_GRPC_ADDR, QUOTA_TLS_CLIENT_CA), or a Secret (the Redis connection).
      const fromValuesOrSecret = mapped.has(name) || /<<\.Values\./.test(source) || variable.valueFrom !== undefined;
      expect(fromValuesOrSecret, `${name} = ${JSON.stringify(variable)}`).toBe(true);
    }
  });

  it("defaults to the service's own defaults", () => {
    const defaults = envSchema.parse({}) as Record<string, unknown>;
    const values = valueSets()[0]!.values;
    const env = renderedEnv(values);
    for (const [name, path] of directMappings(readChartFile('templates/deployment.yaml'))) {
      expect(valueAt(values, path), `${path} (${name})`).toBe(defaults[name]);
    }
    expect(env.QUOTA_GRPC_ADDR).toBe(defaults.QUOTA_GRPC_ADDR);
  });

  it.each(valueSets().map(({ name, values }) => [name, values] as const))('%s: the variables it produces pass the service schema', (_name, values) => {
    const env = withRedisAsConfigured(renderedEnv(values), values);
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['QUOTA_GRPC_ADDR', 'QUOTA_POLICIES', 'QUOTA_LOG_LEVEL', 'QUOTA_SHUTDOWN_GRACE_MS']));
    const parsed = envSchema.safeParse(env);
    expect(parsed.error?.issues ?? []).toEqual([]);
  });

  it('the schema ranges of the mapped values are exactly the service ranges', () => {
    const schema = JSON.parse(readChartFile('values.schema.json')) as {
      properties: Record<string, { properties: Record<string, { minimum?: number; maximum?: number; enum?: string[] }> }>;
    };
    for (const [name, path] of directMappings(readChartFile('templates/deployment.yaml'))) {
      const [section, key] = path.split('.');
      const rule = schema.properties[section!]!.properties[key!]!;
      const accepts = (value: unknown) => envSchema.safeParse({ [name]: String(value) }).success;
      if (rule.enum) {
        const options = (envSchema.shape[name as keyof typeof envSchema.shape] as unknown as { unwrap(): { options: string[] } }).unwrap().options;
        expect(rule.enum, name).toEqual(options);
        continue;
      }
      expect(
        [rule.minimum, rule.maximum].every((bound) => typeof bound === 'number'),
        `${path} has minimum and maximum`,
      ).toBe(true);
      expect([accepts(rule.minimum), accepts(rule.maximum)], `${name} accepts ${rule.minimum}..${rule.maximum}`).toEqual([true, true]);
      expect([accepts(rule.minimum! - 1), accepts(rule.maximum! + 1)], `${name} rejects outside ${rule.minimum}..${rule.maximum}`).toEqual([false, false]);
    }
  });

  it('the env check would catch a values file the service refuses', () => {
    const values = structuredClone(valueSets()[0]!.values);
    (values.config as Record<string, unknown>).breakerHalfOpenMs = 5;
    expect(envSchema.safeParse(renderedEnv(values)).success).toBe(false);
  });

  it('Redis cluster seeds in the ci examples are seeds the service accepts, and the schema pattern agrees with it', () => {
    const seedPattern = new RegExp(
      (JSON.parse(readChartFile('values.schema.json')) as { properties: { redis: { properties: { seeds: { items: { pattern: string } } } } } }).properties.redis
        .properties.seeds.items.pattern,
    );
    const accepts = (seed: string) => envSchema.safeParse({ QUOTA_REDIS_CLUSTER: seed }).success;
    for (const candidate of ['10.0.0.1:6379', 'redis-0.redis:6379', '[fd00::1]:6379', 'redis', 'redis:', ':6379', 'a b:6379']) {
      expect(seedPattern.test(candidate), candidate).toBe(accepts(candidate));
    }
    for (const { name, values } of valueSets()) {
      const seeds = valueAt(values, 'redis.seeds') as string[];
      if (seeds.length > 0) expect(accepts(seeds.join(',')), name).toBe(true);
    }
  });
});

describe('files the service reads, as the values give them', () => {
  it.each(valueSets().map(({ name, values }) => [name, values] as const))('%s: inline policies and callers parse with the service parsers', (_name, values) => {
    const policies = valueAt(values, 'policies.content') as string;
    if (policies !== '') expect(parsePolicies(policies, 'policies.content').size).toBeGreaterThan(0);
    const callers = valueAt(values, 'auth.callers') as string;
    if (callers !== '') expect(parseCallers(callers, 'auth.callers').size).toBeGreaterThan(0);
  });

  it("the chart's default policy file parses", () => {
    expect(parsePolicies(readChartFile('files/policies.yaml'), 'files/policies.yaml').size).toBeGreaterThan(0);
  });
});
