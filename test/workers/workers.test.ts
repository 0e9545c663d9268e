import { createClient, type Channel } from 'nice-grpc';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { cpuLimit } from '../../src/config/cpu-limit.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { answeredBy, ownConnection, sharedBucketPolicies as policyFile, twoReadyWorkers } from '../support/worker-processes.js';

/**
 * QUOTA_WORKERS: real service processes sharing one gRPC port (Node's cluster module),
 * on a real Redis, seen from outside as a caller, Prometheus and an orchestrator see them.
 */
let redis: RedisServer | undefined;
const channels: Channel[] = [];
afterEach(async () => {
  for (const channel of channels.splice(0)) channel.close();
  await redis?.stop();
  redis = undefined;
});

async function scrape(service: ServiceProcess): Promise<string> {
  const port = Number(/"port":(\d+)/.exec(await service.logged(/"msg":"metrics at GET \/metrics/))![1]);
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(response.status).toBe(200);
  return response.text();
}

/** The sum of a metric's samples whose labels include `labels`. */
function sample(text: string, name: string, labels: string[] = []): number {
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => labels.every((label) => line.includes(label)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// Three Node processes per test, through tsx: slow to start on a busy machine running the whole suite.
describe('QUOTA_WORKERS=2 on one port', { timeout: 90_000 }, () => {
  it('both workers answer Allow, the limit is shared exactly, and the metrics endpoint sums both', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({
      QUOTA_WORKERS: '2',
      QUOTA_REDIS_URL: redis.url,
      QUOTA_POLICIES: policyFile(),
      QUOTA_METRICS_ADDR: '127.0.0.1:0',
      QUOTA_LOG_LEVEL: 'debug',
    });
    const workers = await twoReadyWorkers(service);
    expect(new Set(workers).size).toBe(2);
    const port = await service.port;
    // Four connections, which the primary spreads over the workers, two each.
    const clients = [0, 1, 2, 3].map(() => createClient(QuotaServiceDefinition, ownConnection(port, channels)));
    const answers = [];
    for (let i = 0; i < 16; i++) answers.push(await clients[i % 4]!.allow({ policy: 'shared', identity: { user: 'u1' }, requestId: `call-${i}` }));
    // Exactly the bucket's 10, whichever worker answered: the count lives in Redis.
    expect(answers.filter((answer) => answer.allowed)).toHaveLength(10);
    expect(answers.slice(10).every((answer) => !answer.allowed)).toBe(true);

    const pids = new Set<number>();
    for (let i = 0; i < 16; i++) pids.add(await answeredBy(service, `call-${i}`));
    expect([...pids].sort()).toEqual([...workers].sort());

    const metrics = await scrape(service);
    expect(sample(metrics, 'quota_decisions_total', ['policy="shared"', 'result="allowed"'])).toBe(10);
    expect(sample(metrics, 'quota_decisions_total', ['policy="shared"', 'result="rejected"'])).toBe(6);
    expect(sample(metrics, 'quota_check_duration_seconds_count')).toBe(16);
    expect(sample(metrics, 'quota_worker_restarts_total')).toBe(0);
    // Both workers read the same DBSIZE: reported once, not once per worker.
    const client = redis.client();
    expect(sample(metrics, 'quota_state_keys', ['store="shared"'])).toBe(await client.dbsize());
    client.disconnect();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('connections opened all at once are split evenly: each worker serves as many as the other', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({ QUOTA_WORKERS: '2', QUOTA_REDIS_URL: redis.url, QUOTA_POLICIES: policyFile(), QUOTA_LOG_LEVEL: 'debug' });
    const workers = await twoReadyWorkers(service);
    const port = await service.port;
    // A burst, as gRPC callers connect (Envoy one connection per thread): every connection open before the first answer.
    const connections = 12;
    const clients = Array.from({ length: connections }, () => createClient(QuotaServiceDefinition, ownConnection(port, channels)));
    await Promise.all(clients.map((client, i) => client.allow({ policy: 'shared', identity: { user: `burst-${i}` }, requestId: `burst-${i}` })));
    const servedBy = await Promise.all(clients.map((_, i) => answeredBy(service, `burst-${i}`)));
    for (const pid of workers) expect(servedBy.filter((served) => served === pid)).toHaveLength(connections / 2);
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('SIGTERM to the primary stops every worker within the grace period, and the process exits 0', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({ QUOTA_WORKERS: '2', QUOTA_REDIS_URL: redis.url, QUOTA_SHUTDOWN_GRACE_MS: '2000' });
    const workers = await twoReadyWorkers(service);
    const sentAt = Date.now();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
    // The grace period, plus the margin the hard deadline allows for closing the store and exiting.
    expect(Date.now() - sentAt).toBeLessThan(2000 + 3000);
    expect(workers.filter(alive)).toEqual([]);
    const { stdout } = service.output();
    for (const pid of workers) expect(stdout).toMatch(new RegExp(`"pid":${pid},.*"msg":"calls drained, store closed: stopped"`));
    expect(stdout).toMatch(/"msg":"all workers stopped"/);
    // One JSON object per line, from every process.
    for (const line of stdout.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('a worker killed unexpectedly is replaced, and the service keeps answering', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({ QUOTA_WORKERS: '2', QUOTA_REDIS_URL: redis.url, QUOTA_POLICIES: policyFile(), QUOTA_METRICS_ADDR: '127.0.0.1:0' });
    const [first] = await twoReadyWorkers(service);
    process.kill(first!, 'SIGKILL');
    const replaced = JSON.parse(await service.logged(/"msg":"a worker exited unexpectedly: starting a replacement"/));
    expect(replaced).toMatchObject({ pid: first, signal: 'SIGKILL' });
    // The replacement, worker 3, gets ready on the same port.
    await service.logged(/"worker":3,.*"msg":"store ready: health SERVING"/);
    const client = createClient(QuotaServiceDefinition, ownConnection(await service.port, channels));
    expect((await client.allow({ policy: 'shared', identity: { user: 'u2' } })).allowed).toBe(true);
    expect(sample(await scrape(service), 'quota_worker_restarts_total')).toBe(1);
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('a worker that keeps dying is a crash loop: after 3 replacements within a minute the fourth death stops everything, exit code 1', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({ QUOTA_WORKERS: '2', QUOTA_REDIS_URL: redis.url });
    let [victim] = await twoReadyWorkers(service);
    // Workers 3, 4 and 5 replace the first three deaths.
    for (const replacement of [3, 4, 5]) {
      process.kill(victim!, 'SIGKILL');
      victim = JSON.parse(await service.logged(new RegExp(`"worker":${replacement},.*"msg":"store ready: health SERVING"`))).pid;
    }
    process.kill(victim!, 'SIGKILL');
    expect(await service.exit).toBe(1);
    expect(service.output().stdout).toMatch(
      /"restarts":3,"windowMs":60000,"msg":"a worker exited unexpectedly once more than the restarts allowed within the window \(a crash loop\): stopping every worker"/,
    );
    expect(service.output().stdout).toMatch(/"msg":"all workers stopped after a failure"/);
  });

  it('a primary killed outright (SIGKILL, OOM) takes its workers with it: none is left serving', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({ QUOTA_WORKERS: '2', QUOTA_REDIS_URL: redis.url });
    const workers = await twoReadyWorkers(service);
    service.signal('SIGKILL');
    await service.exit;
    // Each worker exits when its channel to the primary closes; poll, as a process table would be read.
    await vi.waitFor(() => expect(workers.filter(alive)).toEqual([]), { timeout: 10_000 });
  });

  it('a worker that cannot start (here: no policy file) ends the whole service with exit code 1', async () => {
    redis = await startRedisServer();
    const service = startServiceProcess({ QUOTA_WORKERS: '2', QUOTA_REDIS_URL: redis.url, QUOTA_POLICIES: '/nonexistent/policies.yaml' });
    expect(await service.exit).toBe(1);
    expect(service.output().stderr).toContain('/nonexistent/policies.yaml');
    expect(service.output().stdout).toMatch(/"msg":"a worker exited before it started: stopping every worker"/);
  });

  it('unset, with Redis: one worker per CPU this process may use', async () => {
    redis = await startRedisServer();
    // An empty value counts as unset (the test helper's default is one process).
    const service = startServiceProcess({ QUOTA_WORKERS: '', QUOTA_REDIS_URL: redis.url });
    const expected = cpuLimit();
    await service.logged(/"msg":"store ready: health SERVING"/, expected);
    if (expected > 1) expect(JSON.parse(await service.logged(/"msg":"all workers listening"/)).workers).toHaveLength(expected);
    else expect(service.output().stdout).not.toMatch(/starting \d+ workers/);
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('QUOTA_WORKERS=2 without Redis is refused at start, naming the variable', async () => {
    const service = startServiceProcess({ QUOTA_WORKERS: '2' });
    expect(await service.exit).toBe(1);
    expect(service.output().stderr).toMatch(/QUOTA_WORKERS: more than one worker needs Redis/);
  });

  it('a value that is not a positive whole number is refused at start', async () => {
    const service = startServiceProcess({ QUOTA_WORKERS: '0' });
    expect(await service.exit).toBe(1);
    expect(service.output().stderr).toContain('QUOTA_WORKERS: expected at least 1 process (got "0")');
  });
});
