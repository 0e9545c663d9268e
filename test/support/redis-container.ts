import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { GenericContainer, getContainerRuntimeClient, type StartedTestContainer } from 'testcontainers';
import { dockerEngine } from './docker.js';

/** A running redis-server, however it was started: a child process here, or a container. */
export interface RedisRun {
  readonly pid: number;
  exited(): boolean;
  /** What it wrote so far (stdout and stderr). */
  output(): string;
  signal(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
  /** kill -9, then wait until it is gone. */
  crash(): Promise<void>;
}

let chosen: 'process' | 'container' | undefined;

/**
 * Where the tests' Redis runs: QUOTA_TEST_REDIS=process|container, or, unset, a process
 * when a redis-server binary is here and a container when only a Docker engine is.
 */
export function redisRuntime(): 'process' | 'container' {
  chosen ??= chooseRedisRuntime(process.env.QUOTA_TEST_REDIS, {
    hasBinary: () => {
      const binary = process.env.REDIS_SERVER_BIN ?? 'redis-server';
      return binary.includes('/') ? existsSync(binary) : (process.env.PATH ?? '').split(':').some((dir) => existsSync(`${dir}/${binary}`));
    },
    hasEngine: () => dockerEngine().ok,
  });
  return chosen;
}

/** The rule of redisRuntime, on its inputs; the probes run only when the variable leaves the choice open. */
export function chooseRedisRuntime(wanted: string | undefined, probe: { hasBinary(): boolean; hasEngine(): boolean }): 'process' | 'container' {
  if (wanted === 'process' || wanted === 'container') return wanted;
  if (wanted !== undefined && wanted !== '') {
    throw new Error(`QUOTA_TEST_REDIS must be "process" or "container" (or unset), not ${JSON.stringify(wanted)}`);
  }
  return probe.hasBinary() || !probe.hasEngine() ? 'process' : 'container';
}

/** The image: QUOTA_TEST_REDIS_IMAGE (`make test` builds one from Debian's package), else the official redis:7. */
export function redisImage(): string {
  return process.env.QUOTA_TEST_REDIS_IMAGE || 'redis:7';
}

/**
 * redis-server in a container (testcontainers) on the host's network: it binds the same
 * 127.0.0.1 ports a process would, so a Redis Cluster announces 127.0.0.1:<port> in its
 * MOVED answers and CLUSTER SLOTS exactly as the process path does, and nothing publishes
 * a port or sends traffic to a bridge address. `dir` (its working directory) and every file
 * named in its arguments (TLS certificates) are mounted at the same path.
 */
export async function startRedisContainer(args: readonly string[], dir: string): Promise<RedisRun> {
  const files = [...new Set(args.filter((arg) => arg.startsWith('/') && arg !== dir && existsSync(arg) && statSync(arg).isFile()).map(dirname))];
  let output = '';
  let exited = false;
  const container: StartedTestContainer = await new GenericContainer(redisImage())
    .withNetworkMode('host')
    .withCommand(['redis-server', ...args])
    .withBindMounts([{ source: dir, target: dir, mode: 'rw' }, ...files.map((source) => ({ source, target: source, mode: 'ro' as const }))])
    .withLogConsumer((stream) => {
      stream.on('data', (chunk: Buffer | string) => (output += chunk.toString()));
    })
    .start();
  const client = await getContainerRuntimeClient();
  const handle = client.container.getById(container.getId());
  const gone = handle.wait().then(() => {
    exited = true;
  });
  gone.catch(() => {});
  const pid = (await handle.inspect()).State.Pid;
  let removed = false;
  const remove = async () => {
    if (removed) return;
    removed = true;
    await container.stop({ timeout: 2_000, remove: true }).catch(() => {});
  };
  return {
    pid,
    exited: () => exited,
    output: () => output,
    signal(signal) {
      // Sent to the container's first process, which is redis-server itself.
      handle.kill({ signal }).catch(() => {});
    },
    stop: remove,
    async crash() {
      await handle.kill({ signal: 'SIGKILL' }).catch(() => {});
      await gone.catch(() => {});
      await remove();
    },
  };
}
