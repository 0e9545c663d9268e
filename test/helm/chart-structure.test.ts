// The chart's files parse, each template holds the one object it is named for, and
// every value in values.yaml carries a comment. Static checks only (see chart.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isPair, isMap as isYamlMap, parse, parseDocument, type Node, type YAMLMap } from 'yaml';
import { CHART_DIR, parseTemplate, readChartFile, REPO_DIR, templateFiles, templateObject } from './chart.js';

/** One Kubernetes object per template file: the file name says which. */
const EXPECTED_OBJECTS: Record<string, { apiVersion: string; kind: string }> = {
  'deployment.yaml': { apiVersion: 'apps/v1', kind: 'Deployment' },
  'service.yaml': { apiVersion: 'v1', kind: 'Service' },
  'configmap-policies.yaml': { apiVersion: 'v1', kind: 'ConfigMap' },
  'configmap-dashboard.yaml': { apiVersion: 'v1', kind: 'ConfigMap' },
  'secret.yaml': { apiVersion: 'v1', kind: 'Secret' },
  'serviceaccount.yaml': { apiVersion: 'v1', kind: 'ServiceAccount' },
  'hpa.yaml': { apiVersion: 'autoscaling/v2', kind: 'HorizontalPodAutoscaler' },
  'pdb.yaml': { apiVersion: 'policy/v1', kind: 'PodDisruptionBudget' },
  'servicemonitor.yaml': { apiVersion: 'monitoring.coreos.com/v1', kind: 'ServiceMonitor' },
  'networkpolicy.yaml': { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
};

describe('Chart.yaml', () => {
  const chart = parse(readChartFile('Chart.yaml')) as Record<string, unknown>;

  it('is a v2 application chart named quota-service with semver versions', () => {
    expect(chart).toMatchObject({ apiVersion: 'v2', name: 'quota-service', type: 'application' });
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("has the service's version (package.json) as appVersion, the default image tag", () => {
    const pkg = JSON.parse(readFileSync(join(REPO_DIR, 'package.json'), 'utf8')) as { version: string };
    expect(chart.appVersion).toBe(pkg.version);
  });
});

describe('templates', () => {
  it('are exactly the expected files plus _helpers.tpl, _validate.tpl and NOTES.txt', () => {
    expect(templateFiles()).toEqual([...Object.keys(EXPECTED_OBJECTS), '_helpers.tpl', '_validate.tpl', 'NOTES.txt'].sort());
  });

  it.each(Object.entries(EXPECTED_OBJECTS))('%s holds one %s object with a templated name and the chart labels', (file, expected) => {
    const object = templateObject(file);
    expect({ apiVersion: object.apiVersion, kind: object.kind }).toEqual(expected);
    const raw = readChartFile(join('templates', file));
    expect(raw).toMatch(/^\s+name: \{\{ include "quota-service\.(fullname|policiesConfigMap|secretName|serviceAccountName)" \. \}\}/m);
    expect(raw).toContain('{{- include "quota-service.labels" . | nindent 4 }}');
  });

  it('the static parse fails on broken YAML and on a second object in one file', () => {
    const service = readChartFile('templates/service.yaml');
    expect(() => parseTemplate(service, 'service.yaml')).not.toThrow();
    expect(() => parseTemplate(service.replace('  ports:\n', '  ports:\n  - bad: [\n'), 'service.yaml')).toThrow(/service\.yaml/);
    expect(() => parseTemplate(`${service}\n---\n${service}`, 'service.yaml')).toThrow(/expected one YAML document, found 2/);
  });

  /** Openers (if, with, range, define) minus `end`s, never below zero along the way; 0 when balanced. */
  function blockBalance(text: string): number {
    let depth = 0;
    for (const [, word] of text.matchAll(/\{\{-?\s*(if|with|range|define|end)\b/g)) {
      depth += word === 'end' ? -1 : 1;
      if (depth < 0) return -1;
    }
    return depth;
  }

  it.each(templateFiles())('%s opens and closes its template blocks in balance', (file) => {
    expect(blockBalance(readChartFile(join('templates', file)))).toBe(0);
  });

  it('the balance check catches a missing end and a stray one', () => {
    const service = readChartFile('templates/service.yaml');
    expect(blockBalance(service.replace('  {{- end }}\n', ''))).toBe(1);
    expect(blockBalance(`{{- end }}\n${service}`)).toBe(-1);
  });

  it('NOTES.txt shows a grpcurl health check on grpc.health.v1', () => {
    const notes = readChartFile('templates/NOTES.txt');
    expect(notes).toMatch(/grpcurl -plaintext localhost:\{\{ \.Values\.grpc\.port \}\} grpc\.health\.v1\.Health\/Check/);
    expect(notes).toContain('kubectl -n {{ .Release.Namespace }} port-forward svc/');
  });

  it('every chart file a template reads with .Files.Get exists', () => {
    const texts = templateFiles().map((file) => readChartFile(join('templates', file)));
    const paths = texts.flatMap((text) => [...text.matchAll(/\.Files\.Get "([^"]+)"/g)].map((match) => match[1]!));
    expect(paths.sort()).toEqual(['dashboards/quota-service.json', 'files/policies.yaml']);
    for (const path of paths) expect(existsSync(join(CHART_DIR, path)), path).toBe(true);
  });

  it('the policies ConfigMap is mounted as a directory (no subPath), so hot reload sees updates', () => {
    const deployment = readChartFile('templates/deployment.yaml');
    expect(deployment).not.toMatch(/^\s*subPath:/m);
    expect(deployment).toMatch(/- name: policies\n\s+mountPath: \/etc\/quota\/policies\n/);
    expect(deployment).toMatch(/- name: QUOTA_POLICIES\n\s+value: \/etc\/quota\/policies\/policies\.yaml\n/);
  });

  it('hashes the Secret into the pod annotations (read at start) but not the policies ConfigMap (hot-reloaded)', () => {
    const deployment = readChartFile('templates/deployment.yaml');
    expect(deployment).toContain('checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}');
    expect(deployment).not.toMatch(/checksum\/.*configmap-policies/);
  });
});

describe('values.yaml', () => {
  /**
   * Dotted paths of the values in values.yaml with no comment of their own. A map whose
   * entries carry comments is a section: each of its entries needs one. A map whose
   * entries carry none (e.g. default labels) is one value, documented above its key.
   */
  function uncommented(text: string): string[] {
    const document = parseDocument(text);
    const missing: string[] = [];
    // The yaml library hangs the comment above a map's first key on the map itself.
    const commentOf = (map: YAMLMap, index: number) => {
      const pair = map.items[index]!;
      return ((pair.key as Node | null)?.commentBefore ?? (index === 0 ? map.commentBefore : undefined))?.trim();
    };
    const isSection = (node: unknown): node is YAMLMap =>
      isYamlMap(node) && node.items.some((_, index) => Boolean(commentOf(node, index)) || isSection(node.items[index]!.value));
    const visit = (map: YAMLMap, path: string) => {
      map.items.forEach((pair, index) => {
        if (!isPair(pair)) return;
        const key = `${path}${String((pair.key as { value?: unknown }).value)}`;
        if (isSection(pair.value)) visit(pair.value, `${key}.`);
        else if (!commentOf(map, index)) missing.push(key);
      });
    };
    visit(document.contents as YAMLMap, '');
    return missing;
  }

  it('parses', () => {
    expect(() => parse(readChartFile('values.yaml'))).not.toThrow();
  });

  it('has a comment on every value', () => {
    expect(uncommented(readChartFile('values.yaml'))).toEqual([]);
  });

  it('the comment check fails on a value without a comment, also inside a commented section', () => {
    const text = readChartFile('values.yaml').replace('replicaCount: 3\n', 'replicaCount: 3\nsneaky: true\n');
    expect(uncommented(text)).toEqual(['sneaky']);
    const inSection = readChartFile('values.yaml').replace(/ {2}# -- QUOTA_STORE_TIMEOUT_MS:.*\n/, '');
    expect(uncommented(inSection)).toEqual(['config.storeTimeoutMs']);
  });

  it("ships the repository's config/policies.yaml as the chart's default policy file", () => {
    expect(readChartFile('files/policies.yaml')).toBe(readFileSync(join(REPO_DIR, 'config', 'policies.yaml'), 'utf8'));
  });
});
