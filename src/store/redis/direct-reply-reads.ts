import type { Cluster, Redis } from 'ioredis';

/**
 * Replies read off the socket as they arrive. ioredis reads its socket with a
 * 'data' listener it prepends, which Node's streams do not count as a 'data'
 * listener: every chunk Redis sends is then buffered, and handed to ioredis a
 * tick later (emitReadable, flow, read, a copy), a detour of a few µs per
 * reply on the decision path. An ordinary 'data' listener beside it, which
 * does nothing, makes Node hand each chunk over as it arrives, to ioredis's
 * listener first as before. Each connection has a socket of its own, so the
 * listener is added on every (re)connect.
 */
export function readRepliesDirectly(redis: Redis): void {
  redis.on('connect', () => redis.stream.on('data', ignore));
}

/** The same for every node of a cluster, the nodes it has now and those it adds. */
export function readClusterRepliesDirectly(cluster: Cluster): void {
  const seen = new WeakSet<Redis>();
  const add = (node: Redis) => {
    if (seen.has(node)) return;
    seen.add(node);
    readRepliesDirectly(node);
    if (node.status === 'connect' || node.status === 'ready') node.stream.on('data', ignore);
  };
  cluster.on('+node', add);
  for (const node of cluster.nodes('all')) add(node);
}

function ignore(): void {}
