import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import { Redis } from 'ioredis';
import type { NetworkNamespace } from './netns.js';
import { own } from './owned-child.js';
import { redisRuntime, startRedisContainer, type RedisRun } from './redis-container.js';

/** A real redis-server process on a free loopback port, owned by the test that started it. */
export interface RedisServer {
  /** The port the harness's own clients use: the plain one, or the TLS one on a TLS-only server. */
  readonly port: number;
  /** Where it listens: 127.0.0.1, or the namespace's address with `netns`. */
  readonly host: string;
  /** redis://<host>:<port>, or rediss:// on a TLS-only server. */
  readonly url: string;
  /** With `tls`: the TLS port, and rediss://127.0.0.1:<tlsPort>. */
  readonly tlsPort?: number;
  readonly tlsUrl?: string;
  /** The redis-server process (on the container path: its id on this host, as Docker reports it). */
  readonly pid: number;
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
  /** Also listen for TLS, on a free port of its own. */
  tls?: RedisServerTls;
  /**
   * Run inside this namespace (test/support/netns.ts), listening on its address,
   * reached over its link: a Redis on another host, which a partition cuts off.
   */
  netns?: NetworkNamespace;
}

/** PEM files for redis-server's TLS port (see test/support/test-certificates.ts). */
export interface RedisServerTls {
  /**
   * The server's certificate and key. The harness's own clients present the same pair
   * when `authClients` is on (as Redis itself does towards a master or a cluster peer
   * with tls-replication and tls-cluster), so it must allow clientAuth too.
   */
  readonly cert: string;
  readonly key: string;
  /** The CA that signed `cert`; with `authClients`, also what client certificates must chain to. */
  readonly ca: string;
  /** tls-auth-clients: yes (Redis's default) requires a client certificate; default false here. */
  readonly authClients?: boolean;
  /** Keep the plain port too (default true); false: TLS only (`--port 0`). */
  readonly plainPort?: boolean;
}

/**
 * Starts redis-server with no persistence; retries on a port taken between probe and bind.
 * A process here, or a container on the host's network (test/support/redis-container.ts:
 * QUOTA_TEST_REDIS=container, or where redis-server is missing and a Docker engine answers).
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = redisRuntime() === 'container' ? 'redis-server' : redisServerBinary();
  const extraArgs = [...(options.args ?? []), ...(options.password === undefined ? [] : ['--requirepass', options.password, '--masterauth', options.password])];
  let lastError: unknown;
  for (let attempt = 0; attempt < (options.port === undefined ? 5 : 1); attempt++) {
    const port = options.port ?? (await freePort());
    const tlsPort = options.tls === undefined ? undefined : await freePort();
    if (tlsPort === port) continue;
    try {
      return await launch(binary, port, extraArgs, options.password, options.tls === undefined ? undefined : { ...options.tls, port: tlsPort! }, options.netns);
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`could not start redis-server: ${String(lastError)}`);
}

async function launch(
  binary: string,
  port: number,
  extraArgs: string[],
  password: string | undefined,
  tls: (RedisServerTls & { port: number }) | undefined,
  netns: NetworkNamespace | undefined,
): Promise<RedisServer> {
  // A port free here is as good as any inside a fresh namespace, where nothing else listens.
  const host = netns?.address ?? '127.0.0.1';
  // Off the loopback interface Redis refuses clients without a password unless told otherwise.
  const netnsArgs = netns === undefined ? [] : ['--protected-mode', 'no'];
  const plain = tls?.plainPort ?? true;
  // The port the harness itself talks to, and how (TLS options for ioredis when it is the TLS one).
  const via = plain ? { port, tls: undefined } : { port: tls!.port, tls: clientTls(tls!) };
  const clientOptions = { ...(password === undefined ? {} : { password }), ...(via.tls === undefined ? {} : { tls: via.tls }) };
  const dir = mkdtempSync(join(tmpdir(), 'quota-redis-'));
  const tlsArgs =
    tls === undefined
      ? []
      : [
          '--tls-port',
          String(tls.port),
          '--tls-cert-file',
          tls.cert,
          '--tls-key-file',
          tls.key,
          '--tls-ca-cert-file',
          tls.ca,
          '--tls-auth-clients',
          tls.authClients ? 'yes' : 'no',
        ];
  const argv = [
    binary,
    '--port',
    plain ? String(port) : '0',
    '--bind',
    host,
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    ...netnsArgs,
    ...tlsArgs,
    ...extraArgs,
  ];
  const run = await startRun(argv, dir, netns);
  const clients: Redis[] = [];

  const stop = async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    await run.stop();
    rmSync(dir, { recursive: true, force: true });
  };

  const url = `${via.tls === undefined ? 'redis' : 'rediss'}://${host}:${via.port}`;
  const probe = new Redis(via.port, host, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, ...clientOptions });
  probe.on('error', () => {});
  try {
    const deadline = Date.now() + 5_000;
    for (;;) {
      if (run.exited()) throw new Error(`redis-server exited: ${run.output().trim()}`);
      try {
        if (probe.status !== 'ready') await probe.connect();
        await probe.ping();
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${via.port}: ${String(error)}\n${run.output()}`);
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
    port: via.port,
    host,
    url,
    pid: run.pid,
    ...(tls === undefined ? {} : { tlsPort: tls.port, tlsUrl: `rediss://${host}:${tls.port}` }),
    client() {
      const client = new Redis(via.port, host, { maxRetriesPerRequest: 1, ...clientOptions });
      clients.push(client);
      return client;
    },
    signal: (signal) => run.signal(signal),
    stop,
    crash: () => run.crash(),
  };
}

/** redis-server as a child process of this one (in `netns` when given), or in a container. */
async function startRun(argv: string[], dir: string, netns: NetworkNamespace | undefined): Promise<RedisRun> {
  if (redisRuntime() === 'container') {
    if (netns !== undefined) throw new Error('netns: a Redis in a network namespace runs as a process here, not in a container (QUOTA_TEST_REDIS=process)');
    // The container's redis user (the official image drops root) writes nodes.conf there.
    chmodSync(dir, 0o777);
    return startRedisContainer(argv.slice(1), dir);
  }
  const [command, args] = netns === undefined ? [argv[0]!, argv.slice(1)] : netns.command(argv);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const owner = own(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return {
    pid: child.pid!,
    exited: () => child.exitCode !== null,
    output: () => output,
    signal: (signal) => {
      child.kill(signal);
    },
    stop: () => owner.stop(2_000),
    crash: async () => {
      child.kill('SIGKILL');
      await owner.exited;
    },
  };
}

/** How the harness's own clients verify the server (and identify themselves with authClients). */
function clientTls(tls: RedisServerTls): ConnectionOptions {
  return {
    ca: readFileSync(tls.ca),
    // The harness checks the chain but not the name: some tests give a server a
    // certificate for another name on purpose, and still need to reach it themselves.
    checkServerIdentity: () => undefined,
    ...(tls.authClients ? { cert: readFileSync(tls.cert), key: readFileSync(tls.key) } : {}),
  };
}
