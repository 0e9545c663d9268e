import { Cluster, type ClusterOptions, type Redis } from 'ioredis';
import { freePort, startRedisServer, type RedisServer, type RedisServerTls } from './redis-server.js';

/**
 * A real Redis Cluster of 3 masters and 3 replicas on free loopback ports,
 * built from plain redis-server processes (test/support/redis-server.ts, so
 * they die with the test run). Built with CLUSTER commands directly rather
 * than `redis-cli --cluster create`, which sleeps a second per check.
 */
export interface RedisCluster {
  /** All six processes; the first three started as masters, node i+3 as the replica of node i. */
  readonly nodes: readonly RedisServer[];
  /** `127.0.0.1:<port>` of every node, for QUOTA_REDIS_CLUSTER. */
  readonly seeds: readonly string[];
  /** With `tls`: `rediss://127.0.0.1:<tlsPort>` of every node, for QUOTA_REDIS_CLUSTER. */
  readonly tlsSeeds: readonly string[];
  /** Milliseconds from the first spawn to a healthy cluster. */
  readonly startupMs: number;
  /** An admin connection to one node (closed by `stop`). */
  node(port: number): Redis;
  /** A fresh ioredis Cluster client (closed by `stop`). */
  client(options?: ClusterOptions): Cluster;
  /** The current view of the cluster, as a healthy node sees it. */
  topology(): Promise<Topology>;
  /** kill -9 of one node; the harness's checks leave it out from then on. */
  crash(port: number): Promise<void>;
  /** Port of the master currently serving `key`'s slot. */
  ownerOf(key: string): Promise<number>;
  /**
   * Resolves once every live node agrees: all slots served, state ok, every master has a
   * linked replica (unless `replicas` is false: after a master was killed its promoted
   * replica has none).
   */
  waitHealthy(options?: { timeoutMs?: number; replicas?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

export interface Shard {
  readonly masterPort: number;
  readonly replicaPorts: readonly number[];
  /** Slot ranges [first, last], inclusive. */
  readonly slots: readonly (readonly [number, number])[];
}

export interface Topology {
  /** Sorted by the first slot they serve. */
  readonly shards: readonly Shard[];
}

export interface RedisClusterOptions {
  /** cluster-node-timeout in ms; small so that failure detection is quick in tests. */
  nodeTimeoutMs?: number;
  /** requirepass/masterauth on every node; the harness's clients authenticate with it. */
  password?: string;
  /** More redis-server arguments for every node; they override the harness's own. */
  args?: string[];
  /**
   * Every node also gets a TLS port of its own, and the cluster bus and replication
   * run over TLS (tls-cluster, tls-replication), so CLUSTER SLOTS answers the TLS
   * ports to TLS clients. The harness itself keeps building and checking the cluster
   * over the plain ports (a node tells a plain connection the plain ports).
   */
  tls?: Omit<RedisServerTls, 'plainPort'>;
  /**
   * False: 3 masters and no replicas (the benches compare a cluster with one
   * node that has no replica either: on a small machine a replica's CPU is
   * taken from everything else). Default true: 3 masters and 3 replicas.
   */
  replicas?: boolean;
}

const SLOTS = 16_384;
const MASTERS = 3;

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const started = Date.now();
  const nodeTimeout = options.nodeTimeoutMs ?? 1_000;
  /** Ports of nodes crashed on purpose. */
  const crashed = new Set<number>();
  const withReplicas = options.replicas ?? true;
  const launched = await Promise.allSettled(
    Array.from({ length: withReplicas ? MASTERS * 2 : MASTERS }, () => startClusterNode(nodeTimeout, options, crashed)),
  );
  const nodes = launched.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const admins = new Map<number, Redis>();
  const clients: Cluster[] = [];
  const stop = async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    await Promise.all([...admins.values()].map((c) => c.quit().catch(() => c.disconnect())));
    await Promise.all(nodes.map((n) => n.server.stop()));
  };
  const failed = launched.find((result) => result.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason;
  }

  const node = (port: number): Redis => {
    let admin = admins.get(port);
    if (admin === undefined) {
      const server = nodes.find((n) => n.server.port === port)?.server;
      if (server === undefined) throw new Error(`no cluster node on port ${port}`);
      admin = server.client();
      // A killed node's connection reports errors while it retries; the checks handle them.
      admin.on('error', () => {});
      admins.set(port, admin);
    }
    return admin;
  };

  const cluster: RedisCluster = {
    nodes: nodes.map((n) => n.server),
    seeds: nodes.map((n) => `127.0.0.1:${n.server.port}`),
    tlsSeeds: nodes.flatMap((n) => (n.server.tlsUrl === undefined ? [] : [n.server.tlsUrl])),
    startupMs: 0,
    node,
    client(clientOptions) {
      const client = new Cluster(
        nodes.map((n) => ({ host: '127.0.0.1', port: n.server.port })),
        options.password === undefined ? clientOptions : { ...clientOptions, redisOptions: { ...clientOptions?.redisOptions, password: options.password } },
      );
      client.on('error', () => {});
      clients.push(client);
      return client;
    },
    topology: () => liveTopology(nodes, node),
    async crash(port) {
      const server = nodes.find((n) => n.server.port === port)?.server;
      if (server === undefined) throw new Error(`no cluster node on port ${port}`);
      crashed.add(port);
      admins.get(port)?.disconnect();
      admins.delete(port);
      await server.crash();
    },
    async ownerOf(key) {
      const [admin] = await liveAdmins(nodes, node);
      const slot = Number(await admin!.call('CLUSTER', 'KEYSLOT', key));
      const shard = (await cluster.topology()).shards.find((s) => s.slots.some(([a, b]) => slot >= a && slot <= b));
      if (shard === undefined) throw new Error(`slot ${slot} is not served`);
      return shard.masterPort;
    },
    waitHealthy: ({ timeoutMs = 15_000, replicas = withReplicas } = {}) => waitHealthy(nodes, node, timeoutMs, replicas),
    stop,
  };

  try {
    await build(nodes, node);
    await cluster.waitHealthy();
  } catch (error) {
    await stop();
    throw error;
  }
  return { ...cluster, startupMs: Date.now() - started };
}

interface ClusterNode {
  readonly server: RedisServer;
  readonly busPort: number;
  /** False once crashed on purpose. */
  alive(): boolean;
}

/** redis-server in cluster mode; the bus port is chosen too (port + 10000 may be out of range). */
async function startClusterNode(nodeTimeout: number, options: RedisClusterOptions, crashed: ReadonlySet<number>): Promise<ClusterNode> {
  const { password, tls } = options;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const [port, busPort] = [await freePort(), await freePort()];
    if (port === busPort) continue;
    try {
      const server = await startRedisServer({
        port,
        ...(password === undefined ? {} : { password }),
        ...(tls === undefined ? {} : { tls: { ...tls, plainPort: true } }),
        args: [
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(busPort),
          '--cluster-node-timeout',
          String(nodeTimeout),
          // Why failover can take "forever" (docs/redis-cluster.md): a replica that never
          // finished its first sync counts its data as ancient and, under the default
          // validity factor 10, refuses to take over. Tests kill masters on purpose, so
          // replicas sync at once (no 5 s diskless delay), waitHealthy waits for every
          // replica link to be up, and a replica may always take over.
          '--cluster-replica-validity-factor',
          '0',
          '--repl-diskless-sync',
          'yes',
          '--repl-diskless-sync-delay',
          '0',
          ...(tls === undefined ? [] : ['--tls-cluster', 'yes', '--tls-replication', 'yes']),
          ...(options.args ?? []),
        ],
      });
      return { server, busPort, alive: () => !crashed.has(port) };
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`could not start a cluster node: ${String(lastError)}`);
}

/** What redis-cli --cluster create does, minus its sleeps: epochs, slots, meet, replicate. */
async function build(nodes: readonly ClusterNode[], node: (port: number) => Redis): Promise<void> {
  const ids = await Promise.all(nodes.map((n) => node(n.server.port).call('CLUSTER', 'MYID') as Promise<string>));
  await Promise.all(
    nodes.map(async (n, i) => {
      const admin = node(n.server.port);
      // Distinct epochs up front, so no epoch collision has to be resolved later.
      await admin.call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1));
      if (i < MASTERS) {
        const first = Math.floor((SLOTS * i) / MASTERS);
        const last = Math.floor((SLOTS * (i + 1)) / MASTERS) - 1;
        await admin.call('CLUSTER', 'ADDSLOTSRANGE', String(first), String(last));
      }
    }),
  );
  const [hub, ...others] = nodes;
  await Promise.all(others.map((n) => node(n.server.port).call('CLUSTER', 'MEET', '127.0.0.1', String(hub!.server.port), String(hub!.busPort))));
  const deadline = Date.now() + 10_000;
  await Promise.all(
    nodes.slice(MASTERS).map(async (replica, i) => {
      const masterId = ids[i]!;
      // REPLICATE needs the master in this node's table: retry until gossip brought it.
      for (;;) {
        try {
          await node(replica.server.port).call('CLUSTER', 'REPLICATE', masterId);
          return;
        } catch (error) {
          if (Date.now() > deadline) throw new Error(`replica ${replica.server.port} could not follow ${masterId}: ${String(error)}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }),
  );
}

async function liveAdmins(nodes: readonly ClusterNode[], node: (port: number) => Redis): Promise<Redis[]> {
  const alive = await Promise.all(
    nodes
      .filter((n) => n.alive())
      .map(async (n) => {
        const admin = node(n.server.port);
        try {
          return (await admin.ping()) === 'PONG' ? admin : undefined;
        } catch {
          return undefined;
        }
      }),
  );
  return alive.filter((a): a is Redis => a !== undefined);
}

/** Parses CLUSTER NODES of one node into shards; also returns lines flagged as failing. */
function parseNodes(text: string): { shards: Shard[]; unhealthy: string[] } {
  const lines = text
    .trim()
    .split('\n')
    .map((line) => line.split(' '));
  const unhealthy = lines.filter((f) => /fail|handshake|noaddr/.test(f[2] ?? '')).map((f) => f.join(' '));
  const port = (f: string[]) => Number(/:(\d+)@/.exec(f[1] ?? '')?.[1]);
  const masters = lines.filter((f) => (f[2] ?? '').includes('master') && f.length > 8);
  const shards = masters.map((m) => ({
    masterPort: port(m),
    replicaPorts: lines
      .filter((f) => (f[2] ?? '').includes('slave') && f[3] === m[0])
      .map(port)
      .sort((a, b) => a - b),
    slots: m.slice(8).map((range) => {
      const [first, last] = range.split('-').map(Number);
      return [first!, last ?? first!] as const;
    }),
  }));
  shards.sort((a, b) => (a.slots[0]?.[0] ?? 0) - (b.slots[0]?.[0] ?? 0));
  return { shards, unhealthy };
}

async function liveTopology(nodes: readonly ClusterNode[], node: (port: number) => Redis): Promise<Topology> {
  const [admin] = await liveAdmins(nodes, node);
  if (admin === undefined) throw new Error('no cluster node answers');
  return { shards: parseNodes(String(await admin.call('CLUSTER', 'NODES'))).shards };
}

async function waitHealthy(nodes: readonly ClusterNode[], node: (port: number) => Redis, timeoutMs: number, replicas: boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let why = 'not checked yet';
  for (;;) {
    why = await unhealthyReason(nodes, node, replicas);
    if (why === '') return;
    if (Date.now() > deadline) throw new Error(`Redis Cluster not healthy after ${timeoutMs} ms: ${why}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** '' when healthy, otherwise the first reason found. */
async function unhealthyReason(nodes: readonly ClusterNode[], node: (port: number) => Redis, replicas: boolean): Promise<string> {
  const admins = await liveAdmins(nodes, node);
  let reference: string | undefined;
  for (const admin of admins) {
    const where = `node ${admin.options.port}`;
    const info = String(await admin.call('CLUSTER', 'INFO'));
    if (!info.includes('cluster_state:ok')) return `${where}: cluster_state not ok`;
    if (!info.includes(`cluster_slots_ok:${SLOTS}`)) return `${where}: not all slots ok`;
    const { shards, unhealthy } = parseNodes(String(await admin.call('CLUSTER', 'NODES')));
    // Dead nodes are expected after a kill; only live ones must look healthy.
    const alivePorts = new Set(admins.map((a) => a.options.port));
    const live = unhealthy.filter((line) => alivePorts.has(Number(/:(\d+)@/.exec(line)?.[1])));
    if (live.length > 0) return `${where} sees ${live[0]}`;
    if (shards.length !== MASTERS) return `${where} sees ${shards.length} masters with slots`;
    const orphan = shards.find((s) => !s.replicaPorts.some((p) => alivePorts.has(p)));
    if (orphan && replicas) return `${where}: master ${orphan.masterPort} has no live replica`;
    const view = JSON.stringify(shards.map((s) => ({ ...s, replicaPorts: s.replicaPorts.filter((p) => alivePorts.has(p)) })));
    if (reference !== undefined && view !== reference) return `${where} disagrees about the topology`;
    reference = view;
    const replication = await admin.info('replication');
    if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) return `${where}: replica link down`;
  }
  return admins.length === 0 ? 'no node answers' : '';
}
