import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis } from 'ioredis';
import { parseClusterSeed } from './cluster-seeds.js';
import { probeConnection } from './connection-probe.js';
import { readClusterRepliesDirectly, readRepliesDirectly } from './direct-reply-reads.js';

/** How to reach Redis: TLS settings and who hears of failed connection attempts. */
export interface RedisConnectionOptions {
  /**
   * TLS settings for rediss:// (QUOTA_REDIS_TLS_*, src/store/redis/redis-tls.ts): a private CA,
   * a client certificate. Used on every node of a cluster; an error with a plain redis://.
   * Kept by reference: changes to it apply from each node's next connection.
   */
  tls?: ConnectionOptions;
  /**
   * Told every failed connection attempt, with the node's host:port (e.g. a certificate
   * that does not verify): ioredis keeps reconnecting by itself and would fail silently.
   */
  onConnectionError?: (error: Error, node: string) => void;
}

/** Fail fast on the decision path: a request waits at most about a second, never in a queue. */
export const COMMAND_TIMEOUT_MS = 1_000;

/**
 * Reconnecting to one node: each attempt gives up after COMMAND_TIMEOUT_MS, and
 * the next starts at most RECONNECT_MAX_MS later. When a partition heals, the
 * next attempt finds Redis within about a second and a half, however long the
 * partition lasted; an attempt left waiting for its own SYN retransmissions
 * (1, 3, 7 s) or ioredis's default back-off (up to 5 s) took several seconds.
 */
const RECONNECT_MAX_MS = 500;
const reconnectDelay = (times: number) => Math.min(50 * 2 ** (times - 1), RECONNECT_MAX_MS) + Math.floor(Math.random() * 50);

/** A client tuned for a decision path: fail fast instead of queueing while Redis is away. */
export function singleNodeClient(url: string, options: RedisConnectionOptions = {}): Redis {
  // The scheme is read as the URL standard does (case-insensitive), not by ioredis's own prefix test.
  const tls = new URL(url).protocol === 'rediss:';
  if (!tls && options.tls !== undefined) throw new Error('TLS settings given for a plain redis:// URL: use rediss://');
  const redis = new Redis(url, {
    // Verification stays on: Node checks the chain and that the certificate names this host or IP.
    // The caller's object itself, not a copy: a reload of the TLS files writes into it
    // (watchRedisTls), and ioredis reads it on every (re)connect.
    ...(tls ? { tls: options.tls ?? {} } : {}),
    enableOfflineQueue: false,
    // Off: the script batcher already sends one EVALSHA per event-loop turn,
    // and auto-pipelining would wrap each in a Pipeline object of its own,
    // garbage that lengthens GC pauses at the p99 of a decision.
    enableAutoPipelining: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: reconnectDelay,
    // Never resend a command whose connection closed: Redis may have run it already (a
    // decision run twice spends twice), and its caller has had the failure mode's answer.
    autoResendUnfulfilledCommands: false,
    lazyConnect: false,
  });
  // ioredis reconnects by itself; without a listener an 'error' event would crash the process.
  redis.on('error', (error: Error) => options.onConnectionError?.(error, `${redis.options.host}:${redis.options.port}`));
  readRepliesDirectly(redis);
  return redis;
}

/**
 * A Redis Cluster client from seed nodes (`host:port` or redis:// / rediss:// URLs,
 * see src/config/env.ts), as fail-fast as the single-node one: no offline queue,
 * a command timeout, and a few short retries while a failover or slot move settles
 * (docs/redis-cluster.md).
 */
export function clusterClient(seeds: readonly string[], options: RedisConnectionOptions = {}): Cluster {
  const parsed = seeds.map(parseClusterSeed);
  const first = parsed[0];
  if (first === undefined) throw new Error('no Redis Cluster seed given');
  if (!first.tls && options.tls !== undefined) throw new Error('TLS settings given for plain Redis Cluster seeds: use rediss:// seeds');
  const cluster = new Cluster(
    parsed.map(({ host, port }) => ({ host, port })),
    {
      enableOfflineQueue: false,
      // Off on a cluster: ioredis follows a MOVED or ASK inside a pipeline only when every
      // command in it got the same redirection, and an auto-pipeline mixes slots, so after
      // a failover some decisions would fail with a raw MOVED instead of being redirected.
      enableAutoPipelining: false,
      lazyConnect: false,
      // Reaching the cluster at all: keep trying (health stays NOT_SERVING meanwhile).
      clusterRetryStrategy: (times) => Math.min(100 * times, 2_000),
      // A command the cluster refused without running it (CLUSTERDOWN, TRYAGAIN, MOVED, ASK)
      // is retried up to 8 times, 100 ms apart, then UNAVAILABLE.
      maxRedirections: 8,
      // Never resend a command whose connection closed: it may have run already, and a
      // decision run twice spends twice. It answers UNAVAILABLE.
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 100,
      slotsRefreshTimeout: COMMAND_TIMEOUT_MS,
      redisOptions: {
        maxRetriesPerRequest: 1,
        commandTimeout: COMMAND_TIMEOUT_MS,
        ...(first.username === undefined ? {} : { username: first.username }),
        ...(first.password === undefined ? {} : { password: first.password }),
        // Every node, seeds and the ones CLUSTER SLOTS names alike, verified against the same CA;
        // the caller's object itself, so a reload reaches every node's next connection.
        ...(first.tls ? { tls: options.tls ?? {} } : {}),
      },
    },
  );
  const report = options.onConnectionError;
  if (report !== undefined) {
    // A node's own connection failed: the error says why (refused, a certificate, ...).
    // ioredis's throwaway CLUSTER SLOTS connections only say "Connection is closed.":
    // when the slots refresh failed on every seed, a probe of each seed finds out why.
    cluster.on('node error', (error: Error, node: string) => {
      if (error.message !== 'Connection is closed.') report(error, node);
    });
    cluster.on('error', (error: Error) => {
      if (!error.message.startsWith('Failed to refresh slots cache')) return;
      for (const { host, port } of parsed) {
        void probeConnection(host, port, first.tls ? { ...options.tls } : undefined, COMMAND_TIMEOUT_MS).then((why) => why && report(why, `${host}:${port}`));
      }
    });
  } else {
    cluster.on('error', () => {});
  }
  readClusterRepliesDirectly(cluster);
  return cluster;
}

/**
 * Resolves once `node` is connected, or has ended, or after the command
 * timeout, whichever comes first; starts a lazy connection. A Cluster client
 * without an offline queue refuses a command for a node whose connection is
 * still being made ("Connection is closed.", as if it may have run), so calls
 * sent again after a slot map change first wait for the new masters here.
 */
export function whenConnected(node: Redis): Promise<void> {
  if (node.status === 'ready' || node.status === 'end') return Promise.resolve();
  if (node.status === 'wait') node.connect().catch(() => {});
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      node.off('ready', done);
      node.off('end', done);
      resolve();
    };
    const timer = setTimeout(done, COMMAND_TIMEOUT_MS);
    node.once('ready', done);
    node.once('end', done);
  });
}
