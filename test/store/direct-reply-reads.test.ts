import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { clusterClient, singleNodeClient, whenConnected } from '../../src/store/redis/redis-clients.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';

/**
 * The store's Redis clients take each reply off the socket as it arrives
 * (src/store/redis/direct-reply-reads.ts): no reply waits a tick in the
 * socket's buffer first. Seen from the socket: besides ioredis's own 'data'
 * listener it has an ordinary one, on every connection; and during a command,
 * Node schedules no deferred 'readable' emission (emitReadable_) for its reply.
 */
const server = useRedisServer();
const cluster = useRedisCluster();
const clients: Array<Redis | Cluster> = [];
afterAll(() => clients.forEach((client) => client.disconnect()));

/** The names of the functions process.nextTick was given while `run` ran. */
async function ticksDuring(run: () => Promise<unknown>): Promise<string[]> {
  const names: string[] = [];
  const nextTick = process.nextTick;
  process.nextTick = (callback: (...args: unknown[]) => void, ...args: unknown[]) => {
    names.push(callback.name);
    nextTick(callback, ...args);
  };
  try {
    await run();
  } finally {
    process.nextTick = nextTick;
  }
  return names;
}

describe('replies read as they arrive', () => {
  it('one node: on the first connection and after a reconnect', async () => {
    const redis = singleNodeClient(server().url);
    clients.push(redis);
    await whenConnected(redis);
    await redis.ping();
    const first = redis.stream;
    expect(first.listenerCount('data')).toBe(2);
    expect(await ticksDuring(() => redis.ping())).not.toContain('emitReadable_');

    // Its connection dropped by Redis: the reconnect makes a new socket.
    const id = await redis.client('ID');
    const closed = new Promise((resolve) => redis.once('close', resolve));
    await server().client().client('KILL', 'ID', String(id));
    await closed;
    await whenConnected(redis);
    expect(redis.stream).not.toBe(first);
    expect(redis.stream.listenerCount('data')).toBe(2);
    expect(await ticksDuring(() => redis.ping())).not.toContain('emitReadable_');
  });

  it('a cluster: every node it connects to', async () => {
    const client = clusterClient(cluster().seeds);
    clients.push(client);
    await new Promise((resolve) => client.once('ready', resolve));
    const masters = client.nodes('master');
    expect(masters).toHaveLength(3);
    await Promise.all(masters.map(whenConnected));
    // Keys of every master's slots, so each master's connection carries replies.
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    await Promise.all(keys.map((key) => client.set(key, '1')));
    expect(new Set(await Promise.all(keys.map((key) => cluster().ownerOf(key)))).size).toBe(3);
    for (const node of masters) expect(node.stream.listenerCount('data')).toBe(2);
    expect(await ticksDuring(() => Promise.all(keys.map((key) => client.get(key))))).not.toContain('emitReadable_');
  });
});
