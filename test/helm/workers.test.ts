// QUOTA_WORKERS as the chart sets it (templates/_helpers.tpl): from the CPU limit through
// the Downward API with Redis and a CPU limit, else 1, unless config.workers says.
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { helm } from '../support/helm.js';
import { CHART_DIR } from './chart.js';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { resourceFieldRef?: { containerName: string; resource: string; divisor: string } };
}

/** The QUOTA_WORKERS entries of the rendered Deployment's container. */
function workersEnv(sets: string[]): EnvVar[] {
  const text = helm(['template', 'quota', CHART_DIR, '--kube-version', '1.30.0', ...sets.flatMap((set) => ['--set', set])]);
  const deployment = parseAllDocuments(text)
    .map((document) => document.toJS() as { kind?: string } | null)
    .find((object) => object?.kind === 'Deployment') as { spec: { template: { spec: { containers: { name: string; env: EnvVar[] }[] } } } };
  const [container] = deployment.spec.template.spec.containers;
  return container!.env.filter((variable) => variable.name === 'QUOTA_WORKERS');
}

const REDIS = 'redis.host=redis-master.redis.svc';

describe('QUOTA_WORKERS in the chart', () => {
  it('with Redis and a CPU limit: one worker per core of the limit, from the Downward API (rounded up to whole cores)', () => {
    expect(workersEnv([REDIS, 'resources.limits.cpu=1500m'])).toEqual([
      { name: 'QUOTA_WORKERS', valueFrom: { resourceFieldRef: { containerName: 'quota-service', resource: 'limits.cpu', divisor: '1' } } },
    ]);
  });

  it('without a CPU limit (the default) or without Redis: 1, which the service accepts', () => {
    for (const sets of [[REDIS], ['redis.mode=none', 'resources.limits.cpu=2']]) {
      const env = workersEnv(sets);
      expect(env, sets.join(' ')).toEqual([{ name: 'QUOTA_WORKERS', value: '1' }]);
      expect(loadConfig({ QUOTA_WORKERS: env[0]!.value }).QUOTA_WORKERS).toBe(1);
    }
  });

  it('config.workers wins over the CPU limit', () => {
    expect(workersEnv([REDIS, 'resources.limits.cpu=4', 'config.workers=2'])).toEqual([{ name: 'QUOTA_WORKERS', value: '2' }]);
  });

  it('config.workers above 1 without Redis fails the render, naming the value', () => {
    expect(() => workersEnv(['redis.mode=none', 'config.workers=2'])).toThrow(/config\.workers above 1 needs Redis/);
  });
});
