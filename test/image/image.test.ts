import { readFileSync } from 'node:fs';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import { listedServices } from '../support/reflection.js';
import { docker, dockerLogs, imageTestsReady, publishedPort, testImage } from '../support/docker.js';
import { chartPod, type ChartPod } from './chart-pod.js';

const ready = imageTestsReady();
const SERVING = 1;
/**
 * What the service's image must not hold, from the lock file: every package that the service
 * and its two workspace packages (contract, core) do not reach through their production
 * dependencies (npm's own resolution: the nearest node_modules up the tree), which takes in
 * the dev-only packages, the client workspaces and whatever only they need.
 */
function notForTheImage(): string[] {
  type Entry = { name?: string; link?: boolean; resolved?: string; dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
  const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, Entry> };
  const nameOf = (path: string) => lock.packages[path]?.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
  const resolve = (from: string, dependency: string): string | undefined => {
    for (let dir = from; ; dir = dir.includes('/node_modules/') ? dir.slice(0, dir.lastIndexOf('/node_modules/')) : '') {
      const candidate = `${dir === '' ? '' : `${dir}/`}node_modules/${dependency}`;
      if (lock.packages[candidate] !== undefined) return candidate;
      if (dir === '') return undefined;
    }
  };
  const reached = new Set<string>();
  const visit = (path: string) => {
    if (reached.has(path)) return;
    reached.add(path);
    const entry = lock.packages[path]!;
    if (entry.link === true) return visit(entry.resolved!);
    for (const dependency of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      const found = resolve(path, dependency);
      if (found !== undefined) visit(found);
    }
  };
  for (const start of ['', 'clients/contract', 'clients/core']) visit(start);
  const needed = new Set([...reached].filter((path) => path.includes('node_modules/')).map(nameOf));
  const all = Object.keys(lock.packages).filter((path) => path.includes('node_modules/'));
  return [...new Set(all.map(nameOf))].filter((name) => !needed.has(name));
}

/**
 * The repository's Dockerfile, built by `make test` (scripts/build-test-images.sh), run as the
 * Helm chart's Deployment runs it (test/image/chart-pod.ts: its user, read-only root, dropped
 * capabilities, env, emptyDir and ConfigMap mounts, ports) against Redis in a container on a
 * private network, the service's ports published on 127.0.0.1 only.
 */
describe.skipIf(!ready.ok)(`the service's image, run as the chart runs it${ready.ok ? '' : ` (skipped: ${ready.reason})`}`, () => {
  const tag = `${process.pid}-${Date.now().toString(36)}`;
  const network = `quota-image-${tag}`;
  const redisName = `quota-image-redis-${tag}`;
  const serviceName = `quota-image-service-${tag}`;
  let pod: ChartPod;
  let channel: Channel;
  let redis: Redis;

  beforeAll(async () => {
    const image = testImage('QUOTA_TEST_IMAGE');
    await docker(['network', 'create', network]);
    await docker([
      'run',
      '--detach',
      '--name',
      redisName,
      '--network',
      network,
      '--network-alias',
      'redis',
      '--publish',
      '127.0.0.1::6379',
      testImage('QUOTA_TEST_REDIS_IMAGE'),
      'redis-server',
      '--protected-mode',
      'no',
      '--save',
      '',
      '--appendonly',
      'no',
    ]);
    redis = new Redis(await publishedPort(redisName, 6379), '127.0.0.1', { maxRetriesPerRequest: 1 });
    // A short preStop sleep keeps the stop test quick; everything else is the chart's default.
    pod = chartPod({ 'redis.host': 'redis', 'lifecycle.preStopSleepSeconds': '1' });
    await docker(['run', '--detach', '--name', serviceName, '--network', network, ...pod.runArgs, image]);
    channel = createChannel(`127.0.0.1:${await publishedPort(serviceName, pod.ports.grpc!)}`);
    await untilServing(channel, serviceName);
  }, 60_000);

  afterAll(async () => {
    channel?.close();
    redis?.disconnect();
    await docker(['rm', '--force', '--volumes', serviceName, redisName]).catch(() => {});
    await docker(['network', 'rm', network]).catch(() => {});
  });

  it("runs as the chart's user on a read-only root file system, its ports published on 127.0.0.1 only", async () => {
    const config = JSON.parse(await docker(['inspect', serviceName]))[0] as {
      Config: { User: string };
      HostConfig: { ReadonlyRootfs: boolean; CapDrop: string[] };
    };
    expect(config.Config.User).toBe('1000:1000');
    expect(config.HostConfig.ReadonlyRootfs).toBe(true);
    expect(config.HostConfig.CapDrop).toEqual(['ALL']);
    expect(await docker(['exec', serviceName, 'id', '-u'])).toBe('1000');
    await expect(docker(['exec', serviceName, 'touch', '/app/written'])).rejects.toThrow(/Read-only file system/);
    // The emptyDir at /tmp is the one writable place.
    await docker(['exec', serviceName, 'touch', '/tmp/written']);
    for (const port of Object.values(pod.ports)) expect(await publishedPort(serviceName, port)).toBeGreaterThan(0);
  });

  it('reports SERVING on grpc.health.v1, for the server and for quota.v1.QuotaService', async () => {
    const health = createClient(HealthDefinition, channel);
    expect((await health.check({ service: '' })).status).toBe(SERVING);
    expect((await health.check({ service: 'quota.v1.QuotaService' })).status).toBe(SERVING);
  });

  it("answers Allow from Redis: the decision is the store's and its state is in Redis", async () => {
    expect(await redis.dbsize()).toBe(0);
    const response = await createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'image-test' } });
    expect(response).toMatchObject({ allowed: true, source: DecisionSource.DECISION_SOURCE_STORE });
    expect(await redis.dbsize()).toBeGreaterThan(0);
  });

  it('lists its services through server reflection (grpcurl list)', async () => {
    const names = await listedServices(channel);
    expect(names).toEqual(
      expect.arrayContaining(['quota.v1.QuotaService', 'quota.v1.QuotaAdminService', 'envoy.service.ratelimit.v3.RateLimitService', 'grpc.health.v1.Health']),
    );
  });

  it('holds the production dependencies only: no dev, build or client-only package (npm ls --omit=dev)', async () => {
    const image = testImage('QUOTA_TEST_IMAGE');
    // npm writes its cache and logs under $HOME, read-only here: a tmpfs takes them.
    const npm = (args: string[]) =>
      docker(['run', '--rm', '--read-only', '--tmpfs', '/tmp', '--env', 'npm_config_cache=/tmp/npm', '--user', '1000:1000', image, ...args]);
    const tree = JSON.parse(await npm(['npm', 'ls', '--omit=dev', '--all', '--json'])) as Tree;
    const inTree = new Set<string>();
    const walk = (node: Tree) => {
      for (const [name, child] of Object.entries(node.dependencies ?? {})) {
        inTree.add(name);
        walk(child);
      }
    };
    walk(tree);
    expect(inTree).toContain('@grpc/grpc-js');
    expect(inTree).toContain('ioredis');
    const excluded = notForTheImage();
    expect(excluded).toEqual(expect.arrayContaining(['vitest', '@biomejs/biome', 'testcontainers', '@quota-service/client', '@modelcontextprotocol/sdk']));
    for (const name of excluded) expect(inTree, name).not.toContain(name);
    // Every package installed in the image is one of the service's: nothing extraneous.
    const installed = (await npm(['find', 'node_modules', '-mindepth', '2', '-maxdepth', '3', '-name', 'package.json']))
      .split('\n')
      .map((path) => path.split('/').slice(1, -1))
      // node_modules/<name>/package.json or node_modules/@<scope>/<name>/package.json: a package, not one of its subpaths.
      .filter((parts) => (parts[0]!.startsWith('@') ? parts.length === 2 : parts.length === 1))
      .map((parts) => parts.join('/'));
    expect(installed.length).toBeGreaterThan(10);
    expect(installed.filter((name) => !inTree.has(name))).toEqual([]);
    const size = Number(await docker(['image', 'inspect', '--format', '{{.Size}}', image]));
    console.log(`image ${image}: ${(size / 1e6).toFixed(0)} MB`);
    expect(size).toBeLessThan(400e6);
  });

  it('stops gracefully on SIGTERM within the grace period, after the preStop hook (docker stop -t)', async () => {
    // The kubelet runs preStop inside the container first: the image must have its command.
    await docker(['exec', serviceName, ...pod.preStop]);
    const started = Date.now();
    await docker(['stop', '--time', String(pod.gracePeriodSeconds), serviceName], { timeoutMs: (pod.gracePeriodSeconds + 10) * 1000 });
    const elapsedMs = Date.now() - started;
    const state = JSON.parse(await docker(['inspect', '--format', '{{json .State}}', serviceName])) as { ExitCode: number; OOMKilled: boolean };
    // 137 would be SIGKILL at the end of the grace period.
    expect(state.ExitCode).toBe(0);
    expect(elapsedMs).toBeLessThan(pod.gracePeriodSeconds * 1000);
    expect(await dockerLogs(serviceName)).toMatch(/SIGTERM/);
  });
});

interface Tree {
  dependencies?: Record<string, Tree>;
}

async function untilServing(channel: Channel, container: string): Promise<void> {
  const health = createClient(HealthDefinition, channel);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await health.check({ service: '' }, { signal: AbortSignal.timeout(1_000) })).status === SERVING) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`the container never reported SERVING; its log:\n${await dockerLogs(container).catch(String)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
