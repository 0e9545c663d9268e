// Ports, probes and graceful termination of the Deployment against the service's
// defaults (src/config/env.ts) and its drain (QUOTA_SHUTDOWN_GRACE_MS).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../src/config/env.js';
import { evaluateArithmetic, helperBody, readChartFile, REPO_DIR, templateObject, valueAt, valueSets } from './chart.js';

interface Probe {
  grpc?: { port: unknown; service?: unknown };
  tcpSocket?: { port: unknown };
  periodSeconds: unknown;
  failureThreshold: unknown;
  timeoutSeconds: unknown;
}
interface Container {
  ports: { name: string; containerPort: unknown }[];
  startupProbe: Probe;
  readinessProbe: Probe;
  livenessProbe: Probe;
  lifecycle: { preStop: { exec: { command: string[] } } };
}
interface PodSpec {
  terminationGracePeriodSeconds: unknown;
  containers: Container[];
}

const deployment = () => templateObject('deployment.yaml') as { spec: { template: { spec: PodSpec } } };
const container = () => deployment().spec.template.spec.containers[0]!;
const portOf = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1));
const GRPC_PORT = '<<.Values.grpc.port>>';
const HEALTH_PORT = '<<.Values.health.port>>';

describe('ports', () => {
  const defaults = envSchema.parse({});

  it("values.yaml's gRPC port is the service's default port (QUOTA_GRPC_ADDR)", () => {
    expect(valueAt(valueSets()[0]!.values, 'grpc.port')).toBe(portOf(defaults.QUOTA_GRPC_ADDR));
  });

  it('the container, the Service and the NetworkPolicy use grpc.port for gRPC and metrics.port for metrics', () => {
    expect(container().ports).toEqual([
      { name: 'grpc', containerPort: GRPC_PORT, protocol: 'TCP' },
      { name: 'metrics', containerPort: '<<.Values.metrics.port>>', protocol: 'TCP' },
      // With tls.enabled only (both branches are parsed): the plaintext health port.
      { name: 'health', containerPort: HEALTH_PORT, protocol: 'TCP' },
    ]);
    const service = templateObject('service.yaml') as { spec: { ports: unknown[] } };
    expect(service.spec.ports).toEqual([
      { name: 'grpc', port: GRPC_PORT, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' },
      { name: 'metrics', port: '<<.Values.metrics.port>>', targetPort: 'metrics', protocol: 'TCP', appProtocol: 'http' },
    ]);
    const policy = templateObject('networkpolicy.yaml') as { spec: { ingress: { ports: { port: unknown }[] }[] } };
    expect(policy.spec.ingress.map((rule) => rule.ports[0]!.port)).toEqual([GRPC_PORT, '<<.Values.metrics.port>>']);
  });

  it('the service listens where the container port says (QUOTA_GRPC_ADDR, QUOTA_METRICS_ADDR from the same values)', () => {
    const env = (container() as unknown as { env: { name: string; value?: string }[] }).env;
    expect(env.find(({ name }) => name === 'QUOTA_GRPC_ADDR')?.value).toBe(`<<.Values.listenHost>>:${GRPC_PORT}`);
    expect(env.find(({ name }) => name === 'QUOTA_METRICS_ADDR')?.value).toBe('<<.Values.listenHost>>:<<.Values.metrics.port>>');
    expect(env.find(({ name }) => name === 'QUOTA_HEALTH_ADDR')?.value).toBe(`<<.Values.listenHost>>:${HEALTH_PORT}`);
    // Set exactly when TLS is on, like the health container port and the probes' choice.
    const raw = readChartFile('templates/deployment.yaml');
    expect(raw).toMatch(/\{\{- if \.Values\.tls\.enabled \}\}\n[^\n]*\n\s+- name: QUOTA_HEALTH_ADDR\n/);
    expect(raw).toMatch(/\{\{- if \.Values\.tls\.enabled \}\}\n\s+- name: health\n/);
  });

  it("values.yaml's health port differs from the gRPC and metrics ports", () => {
    for (const { name, values } of valueSets()) {
      const ports = ['grpc.port', 'metrics.port', 'health.port'].map((path) => valueAt(values, path));
      expect(new Set(ports).size, name).toBe(3);
    }
  });

  it('the Dockerfile exposes the default ports of values.yaml', () => {
    const dockerfile = readFileSync(join(REPO_DIR, 'Dockerfile'), 'utf8');
    const values = valueSets()[0]!.values;
    expect(dockerfile).toMatch(new RegExp(`^EXPOSE ${String(valueAt(values, 'grpc.port'))} ${String(valueAt(values, 'metrics.port'))}$`, 'm'));
  });
});

describe('probes', () => {
  it.each(['startupProbe', 'readinessProbe', 'livenessProbe'] as const)('%s is a native gRPC probe (grpc.health.v1) on the numeric probe port', (name) => {
    const probe = container()[name];
    expect(probe.grpc).toEqual({ port: 'TEMPLATED' });
    expect(probe.tcpSocket).toBeUndefined();
    const raw = readChartFile('templates/deployment.yaml');
    const block = raw.slice(raw.indexOf(`${name}:`), raw.indexOf('periodSeconds', raw.indexOf(`${name}:`)));
    expect(block).toMatch(/grpc:\n\s+port: \{\{ include "quota-service\.probePort" \. \}\}\n/);
    const key = name.replace('Probe', '');
    expect(probe).toMatchObject({
      periodSeconds: `<<.Values.probes.${key}.periodSeconds>>`,
      failureThreshold: `<<.Values.probes.${key}.failureThreshold>>`,
      timeoutSeconds: `<<.Values.probes.${key}.timeoutSeconds>>`,
    });
  });

  it('the probe port is the gRPC port, or the plaintext health port with TLS (the kubelet probe cannot speak TLS), as a number', () => {
    // A number from values, never a port name: the kubelet's gRPC probe takes numbers only.
    expect(helperBody('quota-service.probePort')).toBe('{{- if .Values.tls.enabled }}{{ .Values.health.port }}{{ else }}{{ .Values.grpc.port }}{{ end }}');
  });

  it('the gRPC and health port values are integers in every values set (the schema requires it too)', () => {
    for (const { name, values } of valueSets()) {
      for (const path of ['grpc.port', 'health.port']) expect(Number.isInteger(valueAt(values, path)), `${name} ${path}`).toBe(true);
    }
  });
});

describe('graceful termination', () => {
  const expression = helperBody('quota-service.terminationGracePeriodSeconds');

  it('terminationGracePeriodSeconds comes from the helper, derived from config.shutdownGraceMs, the value QUOTA_SHUTDOWN_GRACE_MS gets', () => {
    expect(readChartFile('templates/deployment.yaml')).toContain(
      'terminationGracePeriodSeconds: {{ include "quota-service.terminationGracePeriodSeconds" . }}',
    );
    expect(expression).toContain('.Values.config.shutdownGraceMs');
    expect(readChartFile('templates/deployment.yaml')).toMatch(
      /- name: QUOTA_SHUTDOWN_GRACE_MS\n\s+value: \{\{ \.Values\.config\.shutdownGraceMs \| int \| quote \}\}/,
    );
  });

  it.each(valueSets().map(({ name, values }) => [name, values] as const))(
    '%s: the grace period covers the preStop sleep and the whole drain, with a margin',
    (_name, values) => {
      const grace = evaluateArithmetic(expression, values);
      const drainSeconds = (valueAt(values, 'config.shutdownGraceMs') as number) / 1000;
      const preStop = valueAt(values, 'lifecycle.preStopSleepSeconds') as number;
      expect(grace).toBeGreaterThan(drainSeconds);
      expect(grace).toBeGreaterThanOrEqual(preStop + Math.ceil(drainSeconds) + 1);
    },
  );

  it('the check fails for a grace period that ignores the drain', () => {
    const values = valueSets()[0]!.values;
    expect(evaluateArithmetic('add .Values.lifecycle.preStopSleepSeconds 1', values)).toBeLessThan(
      (valueAt(values, 'config.shutdownGraceMs') as number) / 1000,
    );
    // Integer division as sprig's div: 10001 ms rounds up to 11 s, never down to 10.
    expect(
      evaluateArithmetic(expression, { ...values, config: { shutdownGraceMs: 10_001 }, lifecycle: { preStopSleepSeconds: 0, terminationExtraSeconds: 1 } }),
    ).toBe(12);
  });

  it('the preStop hook sleeps lifecycle.preStopSleepSeconds with the sleep the runtime image has (busybox in node:*-alpine)', () => {
    expect(container().lifecycle.preStop.exec.command).toEqual(['sleep', '<<.Values.lifecycle.preStopSleepSeconds>>']);
    const dockerfile = readFileSync(join(REPO_DIR, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:\d+-alpine$/m);
  });
});
