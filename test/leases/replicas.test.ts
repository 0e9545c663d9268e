import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Channel, createChannel, createClient } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition, type QuotaServiceClient } from '@quota-service/contract';
import { own } from '../support/owned-child.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { type ServiceProcess, startServiceProcess, untilServing } from '../support/service-process.js';
import { TS_NODE_ARGS } from '../support/ts-node-args.js';

/**
 * Concurrency leases across three real service processes on one Redis, on
 * Redis's own clock: 150 simultaneous acquisitions for one tenant grant
 * exactly `limit`; a holder process killed with SIGKILL keeps its lease until
 * lease_ttl_ms after it acquired it, on the store's clock, and not longer.
 */
const LIMIT = 7;
const TTL_MS = 1_500;

let redis: RedisServer;
const services: ServiceProcess[] = [];
const channels: Channel[] = [];
let clients: QuotaServiceClient[];

beforeAll(async () => {
  redis = await startRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'quota-leases-'));
  const policies = join(dir, 'policies.yaml');
  writeFileSync(
    policies,
    `policies:\n  jobs:\n    failure_mode: fail_closed\n    limits:\n      - { name: jobs-in-flight, key_by: tenant, algorithm: concurrency, limit: ${LIMIT}, lease_ttl_ms: ${TTL_MS} }\n`,
  );
  for (let i = 0; i < 3; i++) services.push(startServiceProcess({ QUOTA_REDIS_URL: redis.url, QUOTA_POLICIES: policies, QUOTA_STORE_TIMEOUT_MS: '20000' }));
  for (const service of services) {
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    channels.push(channel);
  }
  clients = channels.map((channel) => createClient(QuotaServiceDefinition, channel));
}, 60_000);

afterAll(async () => {
  for (const channel of channels) channel.close();
  for (const service of services) service.signal('SIGTERM');
  await Promise.all(services.map((s) => s.exit));
  await redis?.stop();
});

/** Redis's clock, unix ms (the clock leases expire on). */
async function storeNow(): Promise<number> {
  const [seconds, micros] = await redis.client().time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

const heldBy = async (tenant: string) => (await clients[0]!.getQuota({ policy: 'jobs', identity: { tenant } })).limits[0]!.leasesHeld;

describe('leases over three replicas on one Redis', () => {
  it('150 simultaneous acquisitions for one tenant over 3 replicas: exactly limit granted', async () => {
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_, i) => clients[i % 3]!.allow({ policy: 'jobs', identity: { tenant: 'acme' }, cost: 1, requestId: `job-${i}` })),
    );
    const granted = answers.flatMap((a, i) => (a.allowed ? [i] : []));
    expect(granted).toHaveLength(LIMIT);
    expect(answers.every((a) => a.allowed || a.deniedBy === 'jobs-in-flight')).toBe(true);
    expect(await heldBy('acme')).toBe(LIMIT);
    // Each released through another replica than the one that granted it.
    const released = await Promise.all(
      granted.map((i) => clients[(i + 1) % 3]!.release({ policy: 'jobs', identity: { tenant: 'acme' }, requestId: `job-${i}` })),
    );
    expect(released.every((r) => r.released)).toBe(true);
    expect(await heldBy('acme')).toBe(0);
  });

  it('a holder killed with SIGKILL: its lease is held until lease_ttl_ms after it was acquired (store clock), then free', async () => {
    const port = await services[1]!.port;
    const child = spawn(process.execPath, [...TS_NODE_ARGS, 'test/support/lease-holder.ts', `127.0.0.1:${port}`, 'crashy', 'the-job'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const owned = own(child);
    const lines = child.stdout.setEncoding('utf8');
    expect(((await once(lines, 'data')) as [string])[0]).toBe('ready\n');
    const before = await storeNow();
    child.stdin.write('go\n');
    const [line] = (await once(lines, 'data')) as [string];
    const after = await storeNow();
    expect(JSON.parse(line)).toEqual({ allowed: true, leaseExpiresInMs: TTL_MS });
    child.kill('SIGKILL');
    await owned.exited;
    // The lease expires at its acquisition + TTL, somewhere in [before, after] + TTL on the store's clock.
    let seenHeldAfterKill = false;
    for (;;) {
      const t1 = await storeNow();
      const held = await heldBy('crashy');
      const t2 = await storeNow();
      if (t2 < before + TTL_MS) {
        expect(held, `held at store time ${t2 - before} ms after the acquisition began`).toBe(1);
        seenHeldAfterKill = true;
      }
      if (t1 >= after + TTL_MS) {
        expect(held, `free at store time ${t1 - after} ms after the acquisition answered`).toBe(0);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(seenHeldAfterKill).toBe(true);
    // Its place is free: the tenant gets all `limit` leases again.
    for (let i = 0; i < LIMIT; i++) {
      const next = await clients[i % 3]!.allow({ policy: 'jobs', identity: { tenant: 'crashy' }, cost: 1, requestId: `next-${i}` });
      expect(next).toMatchObject({ allowed: true, leaseExpiresInMs: TTL_MS });
    }
  });
});
