import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { own, type OwnedChild } from '../support/owned-child.js';
import { startServiceProcess } from '../support/service-process.js';
import { TS_NODE_ARGS } from '../support/ts-node-args.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';

/**
 * Never over-grant through the real doors: two service processes (each
 * holding slices for its callers) and five client processes on one hot
 * identity: three quota clients with slices (two on the first replica, one
 * on the second) and two with `slices: false` (one per replica, decided by
 * the replica's own slices). One client with slices is killed with SIGKILL
 * half-way. Everything granted stays within capacity + rate x T, T on
 * Redis's clock from before the first decision to after the last.
 */
const RUN_MS = 3_000;
const LIMIT = {
  name: 'hot',
  key_by: 'tenant',
  algorithm: 'token_bucket',
  capacity: 200,
  refill_per_second: 500,
  slices: { share: 0.2, max_units: 50, ttl_ms: 250 },
};

interface ClientProcess {
  child: OwnedChild;
  granted: number;
  sources: Map<string, number>;
  stopped: Promise<void>;
  ready: Promise<void>;
  go(): void;
  kill(): void;
}

function startClient(address: string, tenant: string, mode: 'slices' | 'no-slices'): ClientProcess {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, 'test/support/slice-client-process.ts', address, 'hot', tenant, String(RUN_MS), mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let ready: () => void = () => {};
  let stopped: () => void = () => {};
  const client: ClientProcess = {
    child: own(child),
    granted: 0,
    sources: new Map(),
    ready: new Promise<void>((resolve) => {
      ready = resolve;
    }),
    stopped: new Promise<void>((resolve) => {
      stopped = resolve;
    }),
    go: () => child.stdin.write('go\n'),
    kill: () => child.kill('SIGKILL'),
  };
  let buffered = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      if (line === 'ready') ready();
      else if (line === 'stopped') stopped();
      else if (line !== 'done') {
        const [units, source] = line.split(' ');
        client.granted = Number(units);
        client.sources.set(source!, (client.sources.get(source!) ?? 0) + 1);
      }
    }
  });
  return client;
}

async function redisNow(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Number(micros) / 1000;
}

async function hammer(storeEnv: Record<string, string>, admin: Redis | Cluster, tenant: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'slices-'));
  const policies = join(dir, 'policies.yaml');
  writeFileSync(policies, stringify({ policies: { hot: { limits: [LIMIT] } } }));
  const services = [0, 1].map(() => startServiceProcess({ ...storeEnv, QUOTA_POLICIES: policies, QUOTA_STORE_TIMEOUT_MS: '20000' }));
  try {
    const [a, b] = await Promise.all(services.map((service) => service.port.then((port) => `127.0.0.1:${port}`)));
    const clients = [
      startClient(a!, tenant, 'slices'),
      startClient(a!, tenant, 'slices'),
      startClient(b!, tenant, 'slices'),
      startClient(a!, tenant, 'no-slices'),
      startClient(b!, tenant, 'no-slices'),
    ];
    await Promise.all(clients.map((client) => client.ready));
    const start = await redisNow(admin);
    for (const client of clients) client.go();
    await new Promise((resolve) => setTimeout(resolve, RUN_MS / 2));
    const killed = clients[1]!;
    killed.kill();
    await killed.child.exited;
    const survivors = clients.filter((client) => client !== killed);
    await Promise.all(survivors.map((client) => client.stopped));
    const end = await redisNow(admin);
    await Promise.all(clients.map((client) => client.child.exited));
    const granted = clients.reduce((sum, client) => sum + client.granted, 0);
    const bound = LIMIT.capacity + (LIMIT.refill_per_second * (end - start)) / 1000;
    const sources = (client: ClientProcess) => Object.fromEntries(client.sources);
    console.log(
      `granted ${granted} of at most ${bound.toFixed(0)} over ${(end - start).toFixed(0)} ms; sources per client ${JSON.stringify(clients.map(sources))}`,
    );
    expect(granted).toBeLessThanOrEqual(bound);
    // Both kinds of holder decided from slices: the clients, and the replicas for the clients without.
    expect(clients.slice(0, 3).some((client) => (client.sources.get('slice') ?? 0) > 0)).toBe(true);
    expect(clients.slice(3).some((client) => (client.sources.get('slice') ?? 0) > 0)).toBe(true);
  } finally {
    for (const service of services) service.signal('SIGTERM');
    await Promise.all(services.map((service) => service.exit));
  }
}

describe('never over-grant: 3 quota clients with slices and 2 service replicas holding slices, one client killed with SIGKILL', () => {
  const redis = useRedisServer();
  const cluster = useRedisCluster();

  it('on one Redis', async () => {
    await hammer({ QUOTA_REDIS_URL: redis().url }, redis().client(), 'acme-one');
  }, 180_000);

  it('on the 3+3 cluster', async () => {
    await hammer({ QUOTA_REDIS_CLUSTER: cluster().seeds.join(',') }, cluster().client(), 'acme-cluster');
  }, 180_000);
});
