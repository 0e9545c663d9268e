import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createChannel, createClient } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { watchPolicyFile } from '../../src/config/policy-watcher.js';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { createLogger } from '../../src/logger.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../support/service-process.js';

const policyFile = (capacity: number | string) =>
  `policies:\n  calls:\n    limits:\n      - { name: calls, key_by: user, algorithm: token_bucket, capacity: ${capacity}, refill_per_second: 0.001 }\n`;

let service: ServiceProcess | undefined;
afterAll(() => service?.signal('SIGKILL'));

describe('policy hot reload on a real service process', () => {
  it('ConfigMap symlink swap: a valid file applies without restart; an invalid one is rejected, counted, and the old policy stays', async () => {
    const volume = new ConfigMapVolume(policyFile(2));
    service = startServiceProcess({ QUOTA_POLICIES: volume.file, QUOTA_METRICS_ADDR: '127.0.0.1:0' });
    const metricsPort = Number(/"port":(\d+)/.exec(await service.logged(/"msg":"metrics at GET \/metrics"/))![1]);
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    const client = createClient(QuotaServiceDefinition, channel);
    const spend = async (user: string, times: number) => {
      const allowed = [];
      for (let i = 0; i < times; i++) allowed.push((await client.allow({ policy: 'calls', identity: { user } })).allowed);
      return allowed.filter(Boolean).length;
    };
    const capacity = async () => (await client.listPolicies({})).policies[0]!.limits[0]!.tokenBucket!.capacity;
    expect(await spend('a', 4)).toBe(2);

    volume.update(policyFile(3));
    await service.logged(/"msg":"policies reloaded"/);
    expect(await capacity()).toBe(3);
    expect(await spend('b', 5)).toBe(3);

    volume.update(policyFile(-1));
    const rejected = await service.logged(/"msg":"policy reload rejected/);
    expect(rejected).toContain('policies.calls.limits[0].capacity');
    expect(rejected).toContain('"level":40');
    expect(await capacity()).toBe(3);
    expect(await spend('c', 5)).toBe(3);
    expect(service.output().stdout.match(/"msg":"policies reloaded"/g)).toHaveLength(1);

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toContain('quota_config_reloads_total{result="success"} 2'); // startup + one reload
    expect(metrics).toContain('quota_config_reloads_total{result="failure"} 1');

    // Fixed again: applied.
    volume.update(policyFile(4));
    await service.logged(/"msg":"policies reloaded"/, 2);
    expect(await capacity()).toBe(4);
    channel.close();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });
});

describe('policy watcher on a plain file', () => {
  it('an in-place write is picked up; a write of the same text is not a reload', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quota-policies-'));
    const file = join(dir, 'policies.yaml');
    writeFileSync(file, policyFile(2));
    const results: boolean[] = [];
    let capacityNow = 2;
    let changed: () => void = () => {};
    const watcher = watchPolicyFile({
      path: file,
      loadedText: policyFile(2),
      debounceMs: 50,
      logger: createLogger('silent'),
      onReload: (policies) => {
        capacityNow = (policies.get('calls')!.limits[0]!.params as { capacity: number }).capacity;
      },
      onResult: (success) => {
        results.push(success);
        changed();
      },
    });
    try {
      const next = () => new Promise<void>((resolve) => (changed = resolve));
      writeFileSync(file, policyFile(2)); // same text: nothing to do
      let result = next();
      writeFileSync(file, policyFile(7));
      await result;
      expect(capacityNow).toBe(7);
      result = next();
      writeFileSync(file, 'policies: [');
      await result;
      expect(results).toEqual([true, false]);
      expect(capacityNow).toBe(7);
    } finally {
      watcher.close();
      rmSync(dir, { recursive: true });
    }
  });
});
