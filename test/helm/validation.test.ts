// Settings that need another value to work (a host for single-node Redis, a callers file
// for auth, a Secret for TLS, ...): helm refuses them when it renders the chart, with a
// message naming the value to set (templates/_validate.tpl). Not in values.schema.json:
// helm reports a failed conditional there as `'allOf' failed`, without saying what is missing.
import { describe, expect, it } from 'vitest';
import { helm } from '../support/helm.js';
import { CHART_DIR, defaultValues, isMap, readChartFile, valueAt } from './chart.js';

const KUBE_VERSION = '1.30.0';

/**
 * `helm template` with `--set` pairs: the error helm prints, or undefined when it renders.
 * (Not `helm lint`: in lint mode helm turns `fail` into an info line.)
 */
function renderError(sets: string[]): string | undefined {
  try {
    helm(['template', 'quota', CHART_DIR, '--kube-version', KUBE_VERSION, ...sets.flatMap((set) => ['--set', set])]);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

describe('the Redis address', () => {
  it('has no default host: values.yaml alone fails the render, naming redis.host and how to set it', () => {
    expect(valueAt(defaultValues(), 'redis.host')).toBe('');
    expect(renderError([])).toMatch(/redis\.host is required with redis\.mode single: set it to your Redis Service, e\.g\. --set redis\.host=\S+/);
  });

  it('renders once redis.host is set, and connects there', () => {
    expect(renderError(['redis.host=redis-master.redis.svc'])).toBeUndefined();
    const rendered = helm(['template', 'quota', CHART_DIR, '--kube-version', KUBE_VERSION, '--set', 'redis.host=redis-master.redis.svc']);
    expect(rendered).toContain('redis-connection: "redis://redis-master.redis.svc:6379/0"');
  });
});

describe('incomplete settings fail the render, naming the value to set', () => {
  it.each([
    [
      'single-node Redis without a host',
      ['redis.mode=single', 'redis.host='],
      /redis\.host is required with redis\.mode single: set it to your Redis Service, e\.g\. --set redis\.host=/,
    ],
    ['a Redis Cluster without seeds', ['redis.mode=cluster'], /redis\.seeds is required with redis\.mode cluster: .*--set redis\.seeds=/],
    [
      'caller authentication without a callers file',
      ['auth.enabled=true'],
      /auth\.enabled needs the callers file: set auth\.callers .* or auth\.existingSecret/,
    ],
    ['TLS without a certificate Secret', ['tls.enabled=true'], /tls\.enabled needs tls\.secretName: .*--set tls\.secretName=/],
    ['a Redis CA without TLS to Redis', ['redis.tls.caSecret=redis-ca'], /redis\.tls\.caSecret needs TLS to Redis: set redis\.tls\.enabled=true/],
    [
      'a Redis client certificate without TLS to Redis',
      ['redis.tls.clientCertSecret=redis-client'],
      /redis\.tls\.clientCertSecret needs TLS to Redis: set redis\.tls\.enabled=true/,
    ],
  ])('%s', (_what, sets, message) => {
    const error = renderError(['redis.host=redis-master.redis.svc', ...sets]);
    expect(error).toMatch(message);
    expect(error).not.toMatch(/allOf/);
  });

  it('lists every incomplete setting at once', () => {
    const error = renderError(['redis.mode=cluster', 'auth.enabled=true', 'tls.enabled=true']);
    for (const value of ['redis.seeds', 'auth.callers', 'tls.secretName']) expect(error).toContain(value);
  });

  it.each([
    ['single-node Redis with a host', ['redis.host=redis-master.redis.svc']],
    ['single-node Redis from an existing Secret, without a host', ['redis.host=', 'redis.existingSecret=quota-redis']],
    ['the embedded store, without a host', ['redis.mode=none', 'redis.host=']],
    ['a Redis Cluster with seeds', ['redis.mode=cluster', 'redis.seeds={10.0.0.1:6379}']],
    ['a Redis Cluster from an existing Secret', ['redis.mode=cluster', 'redis.existingSecret=quota-redis']],
    ['auth with an inline callers file', ['redis.host=redis', 'auth.enabled=true', 'auth.callers=callers: {}']],
    ['auth with a callers Secret', ['redis.host=redis', 'auth.enabled=true', 'auth.existingSecret=quota-callers']],
    ['TLS with a certificate Secret', ['redis.host=redis', 'tls.enabled=true', 'tls.secretName=quota-tls']],
    [
      'Redis TLS files with TLS to Redis',
      ['redis.host=redis', 'redis.tls.enabled=true', 'redis.tls.caSecret=redis-ca', 'redis.tls.clientCertSecret=redis-client'],
    ],
    ['a Redis CA with an existing Secret (its URL may be rediss://)', ['redis.existingSecret=quota-redis', 'redis.tls.caSecret=redis-ca']],
  ])('renders %s', (_what, sets) => {
    expect(renderError(sets)).toBeUndefined();
  });
});

describe('values.schema.json', () => {
  it('holds no conditional requirement (helm would report it as `allOf` failed, without naming the value)', () => {
    const conditionals: string[] = [];
    const walk = (node: unknown, path: string) => {
      if (Array.isArray(node)) node.forEach((child, i) => walk(child, `${path}[${i}]`));
      if (!isMap(node)) return;
      for (const key of ['if', 'then', 'else', 'allOf', 'anyOf', 'oneOf', 'dependencies'])
        if (key in node && path.split('.').at(-1) !== 'properties') conditionals.push(`${path}.${key}`);
      for (const [key, child] of Object.entries(node)) walk(child, `${path}.${key}`);
    };
    walk(JSON.parse(readChartFile('values.schema.json')), '');
    expect(conditionals).toEqual([]);
  });
});
