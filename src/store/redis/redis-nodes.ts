import type { Socket } from 'node:net';
import { Cluster, type Redis } from 'ioredis';

/** The nodes that hold state, by host:port: the one node, or every master of the cluster. */
export function stateNodes(redis: Redis | Cluster): Map<string, Redis> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  return new Map(nodes.map((node) => [`${node.options.host}:${node.options.port}`, node]));
}

/** Whether the connection is ready and every node that holds state answers a PING. */
export async function everyNodeAnswers(redis: Redis | Cluster): Promise<boolean> {
  if (redis.status !== 'ready') return false;
  const nodes = [...stateNodes(redis).values()];
  if (nodes.length === 0) return false;
  const pongs = await Promise.all(nodes.map((node) => node.ping()));
  return pongs.every((pong) => pong === 'PONG');
}

/** Keys in the quota database (DBSIZE, O(1); summed over the masters of a cluster). */
export async function keyCount(redis: Redis | Cluster): Promise<number> {
  if (!(redis instanceof Cluster)) return redis.dbsize();
  const sizes = await Promise.all(redis.nodes('master').map((node) => node.dbsize()));
  return sizes.reduce((sum, size) => sum + size, 0);
}

/** A TCP reset where the socket allows it (a TLS socket does not: it is closed as usual). */
export function resetConnection(stream: Socket): void {
  try {
    stream.resetAndDestroy();
  } catch {
    stream.destroy();
  }
}

/** The seeds as given to the client (host:port only: credentials never reach a log line). */
export function describeSeeds(cluster: Cluster): string {
  const seeds = (cluster as unknown as { startupNodes?: { host?: string; port?: number }[] }).startupNodes ?? [];
  return seeds.map((seed) => `${seed.host}:${seed.port}`).join(',');
}
