import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { helm } from '../support/helm.js';

/** What `docker run` needs to run the image as the chart's Deployment runs it. */
export interface ChartPod {
  /** `docker run` options: user, read-only root, dropped capabilities, env, mounts, published ports. */
  readonly runArgs: string[];
  /** The container ports the pod declares (grpc, metrics, ...), by name. */
  readonly ports: Record<string, number>;
  /** terminationGracePeriodSeconds: the most a pod gets between SIGTERM and SIGKILL. */
  readonly gracePeriodSeconds: number;
  /** The preStop hook's command, which the kubelet runs inside the container before SIGTERM. */
  readonly preStop: string[];
  /** The value of every env entry, plain or from the chart's Secret. */
  readonly env: Record<string, string>;
}

interface Manifest {
  kind: string;
  stringData?: Record<string, string>;
  data?: Record<string, string>;
  spec?: { template?: { spec?: PodSpec } };
}
interface PodSpec {
  securityContext: { runAsUser: number; runAsGroup: number; runAsNonRoot?: boolean };
  terminationGracePeriodSeconds: number;
  containers: Container[];
  volumes: { name: string; emptyDir?: object; configMap?: { items: { key: string; path: string }[] } }[];
}
interface Container {
  env: { name: string; value?: string; valueFrom?: { secretKeyRef: { key: string } } }[];
  ports: { name: string; containerPort: number }[];
  securityContext: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
  lifecycle: { preStop: { exec: { command: string[] } } };
}

/**
 * Renders the chart with a real helm (`helm template`, the chart's defaults plus `set`) and
 * turns its Deployment into `docker run` options: the pod's user and group, a read-only root
 * file system and dropped capabilities from the container's securityContext, every env
 * variable (the Redis connection from the chart's Secret), a tmpfs where the chart mounts an
 * emptyDir, the policies ConfigMap as a read-only directory, and each container port
 * published on 127.0.0.1 only (a free port chosen by Docker).
 */
export function chartPod(set: Record<string, string>): ChartPod {
  const sets = Object.entries(set).flatMap(([key, value]) => ['--set', `${key}=${value}`]);
  const manifests = parseAllDocuments(helm(['template', 'quota', 'helm/quota-service', ...sets]))
    .map((document) => document.toJS() as Manifest | null)
    .filter((manifest): manifest is Manifest => manifest !== null);
  const one = (kind: string) => {
    const found = manifests.filter((m) => m.kind === kind);
    if (found.length !== 1) throw new Error(`the chart rendered ${found.length} ${kind} manifests, expected 1`);
    return found[0]!;
  };
  const pod = one('Deployment').spec!.template!.spec!;
  const secret = one('Secret').stringData ?? {};
  const configMap = manifests.find((m) => m.kind === 'ConfigMap' && m.data?.['policies.yaml'] !== undefined);
  const [container] = pod.containers;
  if (container === undefined) throw new Error('the Deployment has no container');

  const env: Record<string, string> = {};
  for (const entry of container.env) {
    const value = entry.value ?? (entry.valueFrom === undefined ? undefined : secret[entry.valueFrom.secretKeyRef.key]);
    if (value === undefined) throw new Error(`env ${entry.name}: no value in the rendered chart`);
    env[entry.name] = value;
  }

  const mounts: string[] = [];
  for (const mount of container.volumeMounts) {
    const volume = pod.volumes.find((v) => v.name === mount.name);
    if (volume?.emptyDir !== undefined) {
      // An emptyDir is writable by the pod's fsGroup; a tmpfs owned by the pod's user is the same here.
      mounts.push('--tmpfs', `${mount.mountPath}:rw,nosuid,nodev,uid=${pod.securityContext.runAsUser},gid=${pod.securityContext.runAsGroup}`);
    } else if (volume?.configMap !== undefined && configMap !== undefined) {
      // A ConfigMap volume is readable by any user of the pod (0644 files).
      const dir = mkdtempSync(join(tmpdir(), 'quota-chart-configmap-'));
      chmodSync(dir, 0o755);
      for (const item of volume.configMap.items) writeFileSync(join(dir, item.path), configMap.data![item.key]!, { mode: 0o644 });
      mounts.push('--volume', `${dir}:${mount.mountPath}:ro`);
    } else {
      throw new Error(`volume ${mount.name} at ${mount.mountPath}: the image test maps emptyDir and the policies ConfigMap only`);
    }
  }

  const security = container.securityContext;
  const ports = Object.fromEntries(container.ports.map((p) => [p.name, p.containerPort]));
  return {
    runArgs: [
      '--user',
      `${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`,
      ...(security.readOnlyRootFilesystem ? ['--read-only'] : []),
      ...(security.allowPrivilegeEscalation === false ? ['--security-opt', 'no-new-privileges'] : []),
      ...(security.capabilities?.drop ?? []).flatMap((capability) => ['--cap-drop', capability]),
      ...Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
      ...mounts,
      ...Object.values(ports).flatMap((port) => ['--publish', `127.0.0.1::${port}`]),
    ],
    ports,
    gracePeriodSeconds: pod.terminationGracePeriodSeconds,
    preStop: container.lifecycle.preStop.exec.command,
    env,
  };
}
