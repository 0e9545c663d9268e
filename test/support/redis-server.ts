import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { own } from './owned-child.js';

/** A real redis-server process on a free loopback port, owned by the test that started it. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** A fresh client; the caller closes it (or `stop` does). */
  client(): Redis;
  /** Sends a signal to the process, e.g. SIGSTOP to freeze it (a hung store) or SIGKILL (a dead one). */
  signal(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
  /** kill -9: no shutdown, no goodbye to clients or to the cluster. */
  crash(): Promise<void>;
}

export function redisServerBinary(): string {
  const binary = process.env.REDIS_SERVER_BIN ?? 'redis-server';
  const probe = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${binary} not found: the tests start their own Redis processes. Run \`make test\` (it installs redis-server), ` +
        'or install it (Debian: apt-get install redis-server) or set REDIS_SERVER_BIN.',
    );
  }
  return binary;
}

/** A loopback port nobody listens on right now (it may be taken before it is bound: retry). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface RedisServerOptions {
  /** A fixed port (e.g. to bring a stopped server back); by default a free one. */
  port?: number;
  /** More redis-server arguments, e.g. ['--maxmemory-policy', 'allkeys-lru']. */
  args?: string[];
  /** requirepass (and masterauth, for replicas); the harness's own clients authenticate with it. */
  password?: string;
}

/** Starts redis-server with no persistence; retries on a port taken between probe and bind. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = redisServerBinary();
  const extraArgs = [...(options.args ?? []), ...(options.password === undefined ? [] : ['--requirepass', options.password, '--masterauth', options.password])];
  let lastError: unknown;
  for (let attempt = 0; attempt < (options.port === undefined ? 5 : 1); attempt++) {
    const port = options.port ?? (await freePort());
    try {
      return await launch(binary, port, extraArgs, options.password);
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`could not start redis-server: ${String(lastError)}`);
}

async function launch(binary: string, port: number, extraArgs: string[], password: string | undefined): Promise<RedisServer> {
  const auth = password === undefined ? {} : { password };
  const dir = mkdtempSync(join(tmpdir(), 'quota-redis-'));
  const child = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const owner = own(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const clients: Redis[] = [];

  const stop = async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    await owner.stop(2_000);
    rmSync(dir, { recursive: true, force: true });
  };

  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, ...auth });
  probe.on('error', () => {});
  try {
    const deadline = Date.now() + 5_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${output.trim()}`);
      try {
        if (probe.status !== 'ready') await probe.connect();
        await probe.ping();
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${port}: ${String(error)}\n${output}`);
        probe.disconnect();
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  } catch (error) {
    probe.disconnect();
    await stop();
    throw error;
  }
  probe.disconnect();

  return {
    port,
    url,
    client() {
      const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, ...auth });
      clients.push(client);
      return client;
    },
    signal(signal) {
      child.kill(signal);
    },
    stop,
    async crash() {
      child.kill('SIGKILL');
      await owner.exited;
    },
  };
}
