import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startRedisCluster } from './redis-cluster.js';
import { useRedisCluster } from './use-redis.js';

function refused(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => socket.destroy() && resolve('connected'));
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

describe('test harness: Redis Cluster', () => {
  const cluster = useRedisCluster();

  it('has 3 masters covering all 16384 slots, each with one replica, on distinct loopback ports', async () => {
    const { shards } = await cluster().topology();
    expect(shards).toHaveLength(3);
    expect(shards.flatMap((s) => s.slots)).toEqual([
      [0, 5460],
      [5461, 10921],
      [10922, 16383],
    ]);
    expect(shards.every((s) => s.replicaPorts.length === 1)).toBe(true);
    const ports = shards.flatMap((s) => [s.masterPort, ...s.replicaPorts]);
    expect(new Set(ports).size).toBe(6);
    expect(cluster().seeds).toHaveLength(6);
  });

  it('a key lands on the master that serves its slot, and its replica receives it', async () => {
    const client = cluster().client();
    // {a} hashes to slot 15495, {b} to 3300, {c} to 7365 (CRC16 of the tag): one per master.
    for (const [key, slot, shardIndex] of [
      ['{a}k', 15495, 2],
      ['{b}k', 3300, 0],
      ['{c}k', 7365, 1],
    ] as const) {
      await client.set(key, 'v');
      const shard = (await cluster().topology()).shards[shardIndex]!;
      expect(Number(await cluster().node(shard.masterPort).call('CLUSTER', 'KEYSLOT', key))).toBe(slot);
      expect(await cluster().ownerOf(key)).toBe(shard.masterPort);
      expect(await cluster().node(shard.masterPort).get(key)).toBe('v');
      // WAIT: the write reached the replica before we look there.
      expect(await cluster().node(shard.masterPort).call('WAIT', '1', '2000')).toBe(1);
      const replica = cluster().node(shard.replicaPorts[0]!);
      await replica.call('READONLY');
      expect(await replica.get(key)).toBe('v');
      const others = (await cluster().topology()).shards.filter((s) => s !== shard && s.masterPort !== shard.masterPort);
      for (const other of others) {
        await expect(cluster().node(other.masterPort).get(key)).rejects.toThrow(/^MOVED \d+ 127\.0\.0\.1:\d+/);
      }
    }
  });

  it('a second cluster starts beside the first and stops every process', async () => {
    const own = await startRedisCluster();
    expect(await own.client().ping()).toBe('PONG');
    await own.stop();
    for (const node of own.nodes) expect(await refused(node.port)).toBe('ECONNREFUSED');
  });
});
