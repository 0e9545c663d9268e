import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import { startRedisServer, type RedisServer } from './support/redis-server.js';
import { useRedisCluster } from './support/use-redis.js';
import { TS_NODE_ARGS } from './support/ts-node-args.js';

/** The service as `make run` starts it (through tsx, so no build step is needed). */
function startService(env: Record<string, string>) {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, 'src/main.ts'], {
    // A generous store budget: a stall of a busy CI machine must not hand a decision to the failure mode.
    // One process: the default with Redis is one per CPU (test/workers/ tests more).
    env: { PATH: process.env.PATH, QUOTA_GRPC_ADDR: '127.0.0.1:0', QUOTA_STORE_TIMEOUT_MS: '2000', QUOTA_WORKERS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = new Promise<number>((resolve, reject) => {
    child.stdout.on('data', () => {
      const match = /"port":(\d+),"msg":"quota service listening"/.exec(stdout);
      if (match) resolve(Number(match[1]));
    });
    void exit.then((code) => reject(new Error(`service exited with ${code}: ${stderr}`)));
  });
  // Tests of a refused start await `exit`, not `port`: its rejection is expected there.
  port.catch(() => {});
  return { child, port, exit, output: () => ({ stdout, stderr }) };
}

/** Waits, as a load balancer or Kubernetes probe would, until health says SERVING. */
async function untilServing(channel: Channel): Promise<void> {
  const health = createClient(HealthDefinition, channel);
  const deadline = Date.now() + 10_000;
  while ((await health.check({ service: '' })).status !== 1) {
    if (Date.now() > deadline) throw new Error('service never reported SERVING');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const running: ChildProcess[] = [];
afterAll(() => running.forEach((child) => child.kill('SIGKILL')));

describe('the service process', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each([
    ['the embedded store', {}, /no Redis configured \(QUOTA_REDIS_URL, QUOTA_REDIS_CLUSTER\): using the embedded in-memory store/],
    ['Redis', 'redis', /"store":"redis 127\.0\.0\.1:\d+","msg":"deciding in Redis"/],
  ] as const)('serves orders on %s, then drains and exits 0 on SIGTERM', async (_name, env, logLine) => {
    const service = startService(env === 'redis' ? { QUOTA_REDIS_URL: redis.url } : env);
    running.push(service.child);
    expect(await elevenOrders(await service.port)).toEqual([...Array(10).fill(true), false]);

    service.child.kill('SIGTERM');
    expect(await service.exit).toBe(0);
    const { stdout } = service.output();
    expect(stdout.match(logLine)).toHaveLength(1);
    expect(stdout).toContain('"msg":"calls drained, store closed: stopped"');
  });

  it('stays NOT_SERVING while Redis does not answer, answers by the failure mode meanwhile, and still stops cleanly', async () => {
    const closed = await startRedisServer();
    await closed.stop(); // a port nobody listens on
    const service = startService({ QUOTA_REDIS_URL: closed.url });
    running.push(service.child);
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    expect((await createClient(HealthDefinition, channel).check({ service: '' })).status).toBe(2); // NOT_SERVING
    // orders fails over to the local limiter (config/policies.yaml): an answer, not an error.
    const response = await createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'u' } });
    expect(response).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_LOCAL });
    channel.close();
    service.child.kill('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('refuses a bad variable with its name and exits 1', async () => {
    const service = startService({ QUOTA_REDIS_URL: 'http://nope' });
    expect(await service.exit).toBe(1);
    expect(service.output().stderr).toMatch(/invalid configuration:\n {2}QUOTA_REDIS_URL: expected redis:\/\/host:port/);
  });

  it('refuses a bad policy file naming the policy and field, and exits 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quota-policies-'));
    const file = join(dir, 'policies.yaml');
    writeFileSync(
      file,
      'policies:\n  orders:\n    limits:\n      - { name: orders, key_by: user, algorithm: token_bucket, capacity: 0, refill_per_second: 2 }\n',
    );
    const service = startService({ QUOTA_POLICIES: file });
    expect(await service.exit).toBe(1);
    expect(service.output().stderr).toContain('policies.orders.limits[0].capacity:');
  });
});

/** Waits for SERVING, then asks for 11 orders of one user: the bucket holds 10. */
async function elevenOrders(port: number): Promise<boolean[]> {
  const channel = createChannel(`127.0.0.1:${port}`);
  try {
    await untilServing(channel);
    const client = createClient(QuotaServiceDefinition, channel);
    const decisions = [];
    for (let i = 0; i < 11; i++) decisions.push((await client.allow({ policy: 'orders', identity: { user: 'main' } })).allowed);
    return decisions;
  } finally {
    channel.close();
  }
}

describe('the service process on a Redis Cluster (QUOTA_REDIS_CLUSTER)', () => {
  const cluster = useRedisCluster();

  it('serves orders from the cluster, naming its seeds, then exits 0 on SIGTERM', async () => {
    const seeds = cluster().seeds.slice(0, 3).join(',');
    const service = startService({ QUOTA_REDIS_CLUSTER: seeds });
    running.push(service.child);
    expect(await elevenOrders(await service.port)).toEqual([...Array(10).fill(true), false]);
    service.child.kill('SIGTERM');
    expect(await service.exit).toBe(0);
    const { stdout } = service.output();
    expect(stdout).toContain(`"store":"redis cluster seeds ${seeds}","msg":"deciding in Redis"`);
    expect(stdout).not.toContain('maxmemory-policy');
  });
});

describe('early-eviction guard at start: one warning when quota state may be evicted or the policy cannot be read', () => {
  it.each([
    [
      'allkeys-lru',
      ['--maxmemory-policy', 'allkeys-lru'],
      /"level":40,.*"policies":\{"127\.0\.0\.1:\d+":"allkeys-lru"\},"msg":"maxmemory-policy allkeys-lru on 127\.0\.0\.1:\d+ may evict quota state/,
    ],
    [
      'CONFIG disabled',
      ['--rename-command', 'CONFIG', ''],
      /"level":40,.*"msg":"could not read maxmemory-policy \(CONFIG disabled, e\.g\. on managed Redis\?\)/,
    ],
  ])('%s: one warning, and the service still serves', async (_name, args, warning) => {
    const redis = await startRedisServer({ args });
    try {
      const service = startService({ QUOTA_REDIS_URL: redis.url });
      running.push(service.child);
      const channel = createChannel(`127.0.0.1:${await service.port}`);
      await untilServing(channel);
      expect((await createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'u' } })).allowed).toBe(true);
      channel.close();
      service.child.kill('SIGTERM');
      expect(await service.exit).toBe(0);
      expect(service.output().stdout.match(new RegExp(warning.source, 'g'))).toHaveLength(1);
    } finally {
      await redis.stop();
    }
  });
});
