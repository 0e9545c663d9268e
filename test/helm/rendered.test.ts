// The chart as helm renders it (a real helm binary, test/support/helm.ts), for the
// default values (with the Redis host they leave out) and every ci/ values file: helm lint --strict passes, and the
// rendered objects fit the service: the environment passes the service's own
// config schema (with the connection string from the rendered Secret), ports and
// probes agree, every mount has its volume, the policies and callers parse.
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseCallers } from '../../src/config/callers.js';
import { envSchema, loadConfig } from '../../src/config/env.js';
import { parsePolicies } from '@quota-service/core';
import { helm } from '../support/helm.js';
import { CHART_DIR, ciValueFiles, mergeValues, valueAt, valueSets, type Values } from './chart.js';

interface K8sObject {
  kind: string;
  metadata: { name: string };
  [key: string]: unknown;
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Container {
  env: EnvVar[];
  ports: { name: string; containerPort: number }[];
  volumeMounts: { name: string; mountPath: string }[];
  startupProbe: { grpc?: { port: unknown } };
  readinessProbe: { grpc?: { port: unknown } };
  livenessProbe: { grpc?: { port: unknown } };
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}
interface PodSpec {
  containers: Container[];
  volumes: { name: string; secret?: { secretName: string }; configMap?: { name: string } }[];
  terminationGracePeriodSeconds: number;
}

const KUBE_VERSION = '1.30.0';
/** values.yaml has no Redis host (the render fails without one, validation.test.ts): the defaults plus this one. */
const REDIS_HOST = 'redis-master.redis.svc';
const cases = [undefined, ...ciValueFiles()].map((file) => {
  if (file === undefined) {
    const values = mergeValues(valueSets()[0]!.values, { redis: { host: REDIS_HOST } }) as Values;
    return { name: `values.yaml with redis.host=${REDIS_HOST}`, values, args: ['--set', `redis.host=${REDIS_HOST}`] };
  }
  const name = `ci/${file}`;
  const values = valueSets().find((set) => set.name === name)!.values;
  return { name, values, args: ['-f', join(CHART_DIR, 'ci', file)] };
});

function render(args: string[]): K8sObject[] {
  const text = helm(['template', 'quota', CHART_DIR, '--kube-version', KUBE_VERSION, ...args]);
  return parseAllDocuments(text)
    .map((document) => document.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
}

const portOf = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1));
const only = <T>(items: T[], what: string): T => {
  expect(items, what).toHaveLength(1);
  return items[0]!;
};

describe.each(cases)('helm renders $name', ({ values, args }) => {
  const objects = render(args);
  const deployment = only(
    objects.filter((o) => o.kind === 'Deployment'),
    'one Deployment',
  ) as K8sObject & { spec: { replicas?: number; template: { spec: PodSpec } } };
  const pod = deployment.spec.template.spec;
  const container = only(pod.containers, 'one container');
  const secretData = (name: string, key: string): string | undefined => {
    const secret = objects.find((o) => o.kind === 'Secret' && o.metadata.name === name) as { stringData?: Record<string, string> } | undefined;
    return secret?.stringData?.[key];
  };

  it('passes helm lint --strict', () => {
    expect(helm(['lint', '--strict', '--kube-version', KUBE_VERSION, CHART_DIR, ...args])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('renders the objects its values turn on, each once', () => {
    const kinds = objects.map((o) => o.kind).sort();
    const expected = ['Deployment', 'Service'];
    if (valueAt(values, 'serviceAccount.create') === true) expected.push('ServiceAccount');
    if (valueAt(values, 'podDisruptionBudget.enabled') === true) expected.push('PodDisruptionBudget');
    if (valueAt(values, 'autoscaling.enabled') === true) expected.push('HorizontalPodAutoscaler');
    if (valueAt(values, 'serviceMonitor.enabled') === true) expected.push('ServiceMonitor');
    if (valueAt(values, 'networkPolicy.enabled') === true) expected.push('NetworkPolicy');
    for (const kind of expected) expect(kinds, kind).toContain(kind);
    expect(kinds.filter((k) => k === 'HorizontalPodAutoscaler').length).toBe(valueAt(values, 'autoscaling.enabled') === true ? 1 : 0);
    // An HPA owns the replica count: the Deployment must then leave it out.
    expect(deployment.spec.replicas).toBe(valueAt(values, 'autoscaling.enabled') === true ? undefined : valueAt(values, 'replicaCount'));
  });

  it("sets an environment the service's own config schema accepts (the connection string from the rendered Secret)", () => {
    const env: Record<string, string> = {};
    for (const variable of container.env) {
      if (!variable.name.startsWith('QUOTA_')) continue;
      expect(Object.hasOwn(envSchema.shape, variable.name), `${variable.name} is a variable the service reads`).toBe(true);
      const ref = variable.valueFrom?.secretKeyRef;
      // An existing Secret is the user's: a stand-in of the scheme the values select.
      const standIn = `${valueAt(values, 'redis.tls.enabled') === true ? 'rediss' : 'redis'}://redis.example:6379`;
      env[variable.name] = variable.value ?? (ref === undefined ? '' : (secretData(ref.name, ref.key) ?? standIn));
    }
    expect(() => loadConfig(env)).not.toThrow();
    expect(loadConfig(env).unknownVariables).toEqual([]);
  });

  it('listens where the container ports say, and probes grpc.health.v1 on a numeric plaintext port', () => {
    const env = Object.fromEntries(container.env.map((v) => [v.name, v.value ?? '']));
    const port = (name: string) => container.ports.find((p) => p.name === name)?.containerPort;
    expect(portOf(env.QUOTA_GRPC_ADDR!)).toBe(port('grpc'));
    if (env.QUOTA_METRICS_ADDR !== undefined) expect(portOf(env.QUOTA_METRICS_ADDR)).toBe(port('metrics'));
    const tls = valueAt(values, 'tls.enabled') === true;
    expect(env.QUOTA_HEALTH_ADDR === undefined ? undefined : portOf(env.QUOTA_HEALTH_ADDR)).toBe(tls ? port('health') : undefined);
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      expect(probe.grpc?.port).toBe(tls ? port('health') : port('grpc'));
      expect(typeof probe.grpc?.port).toBe('number');
    }
  });

  it('the Service targets container ports by name', () => {
    const service = objects.find((o) => o.kind === 'Service') as K8sObject & { spec: { ports: { targetPort: unknown }[] } };
    const names = container.ports.map((p) => p.name);
    for (const { targetPort } of service.spec.ports) expect(names).toContain(targetPort);
  });

  it("the Service declares each port's application protocol: grpc for gRPC, http for metrics", () => {
    const service = objects.find((o) => o.kind === 'Service') as K8sObject & { spec: { ports: { name: string; appProtocol?: string }[] } };
    const expected: Record<string, string> = { grpc: 'grpc', metrics: 'http' };
    expect(service.spec.ports.map((p) => p.name)).toContain('grpc');
    for (const { name, appProtocol } of service.spec.ports) expect(appProtocol, name).toBe(expected[name]);
  });

  it('mounts only volumes the pod has, from Secrets and ConfigMaps that exist or that the values name', () => {
    const volumes = new Map(pod.volumes.map((v) => [v.name, v]));
    for (const mount of container.volumeMounts) expect(volumes.has(mount.name), mount.name).toBe(true);
    const rendered = (kind: string, name: string) => objects.some((o) => o.kind === kind && o.metadata.name === name);
    const named = JSON.stringify(values);
    for (const volume of pod.volumes) {
      if (volume.secret) expect(rendered('Secret', volume.secret.secretName) || named.includes(`"${volume.secret.secretName}"`), volume.name).toBe(true);
      if (volume.configMap) expect(rendered('ConfigMap', volume.configMap.name) || named.includes(`"${volume.configMap.name}"`), volume.name).toBe(true);
    }
  });

  it('gives the pod longer to stop than its preStop sleep plus the drain', () => {
    const env = Object.fromEntries(container.env.map((v) => [v.name, v.value ?? '']));
    const sleep = Number(container.lifecycle?.preStop?.exec?.command.at(-1) ?? 0);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(sleep + Number(env.QUOTA_SHUTDOWN_GRACE_MS) / 1000);
  });

  it('ships a policy file, and a callers file, that the service parses', () => {
    const policies = objects.find((o) => o.kind === 'ConfigMap' && (o as { data?: Record<string, string> }).data?.['policies.yaml'] !== undefined) as
      | { data: Record<string, string> }
      | undefined;
    if (valueAt(values, 'policies.existingConfigMap') === '') expect(parsePolicies(policies!.data['policies.yaml']!, 'policies.yaml').size).toBeGreaterThan(0);
    const callers = (values as Values & { auth: { enabled: boolean; callers: string } }).auth;
    if (callers.enabled && callers.callers !== '') {
      const secret = container.env.find((v) => v.name === 'QUOTA_AUTH_TOKENS');
      expect(secret?.value).toMatch(/^\/etc\/quota\//);
      expect(parseCallers(callers.callers).size).toBeGreaterThan(0);
    }
  });
});

describe('redis.functions', () => {
  const functionsEnv = (args: string[]) => {
    const deployment = render(['--set', `redis.host=${REDIS_HOST}`, ...args]).find((o) => o.kind === 'Deployment') as K8sObject & {
      spec: { template: { spec: PodSpec } };
    };
    return deployment.spec.template.spec.containers[0]!.env.find((v) => v.name === 'QUOTA_REDIS_FUNCTIONS');
  };

  it('true by default; false sets QUOTA_REDIS_FUNCTIONS=false, which the service reads as off', () => {
    expect(functionsEnv([])).toEqual({ name: 'QUOTA_REDIS_FUNCTIONS', value: 'true' });
    const off = functionsEnv(['--set', 'redis.functions=false']);
    expect(off).toEqual({ name: 'QUOTA_REDIS_FUNCTIONS', value: 'false' });
    expect(loadConfig({ QUOTA_REDIS_FUNCTIONS: off!.value }).QUOTA_REDIS_FUNCTIONS).toBe(false);
    expect(loadConfig({}).QUOTA_REDIS_FUNCTIONS).toBe(true);
  });
});
