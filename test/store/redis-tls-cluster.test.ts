import { createChannel } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityKey } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.js';
import { redisTlsFixture } from '../support/redis-tls-fixture.js';
import { limitFrom } from '../support/store-fixtures.js';
import { decideLimit } from '../support/store-calls.js';

/** A 3+3 Redis Cluster over TLS; one redis-server over TLS is redis-tls.test.ts. */
const { certificates, file, service, stopService, elevenOrders } = redisTlsFixture();

describe('a 3+3 Redis Cluster over TLS (tls-cluster, tls-replication, tls-auth-clients yes)', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ tls: { cert: file('redis.crt'), key: file('redis.key'), ca: file('ca.crt'), authClients: true } });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('rediss:// seeds: decisions on every master, each key on the master that owns its slot', async () => {
    // Seeds are one master and one replica: the client learns the other masters' TLS ports from CLUSTER SLOTS.
    const seeds = [cluster.tlsSeeds[0]!, cluster.tlsSeeds[5]!];
    const started = service({
      QUOTA_REDIS_CLUSTER: seeds.join(','),
      QUOTA_REDIS_TLS_CA: file('ca.crt'),
      QUOTA_REDIS_TLS_CERT: file('client.crt'),
      QUOTA_REDIS_TLS_KEY: file('client.key'),
    });
    const channel = createChannel(`127.0.0.1:${await started.port}`);
    const owners = new Set<number>();
    try {
      for (const user of ['a', 'b', 'c']) {
        owners.add(await cluster.ownerOf(`{${user}}`));
        expect(await elevenOrders(channel, user)).toEqual([...Array(10).fill(true), false]);
      }
    } finally {
      channel.close();
    }
    expect(owners.size).toBe(3);
    // Checked over the harness's plain admin connections: one key per user, on its slot's master.
    for (const user of ['a', 'b', 'c']) expect(await cluster.node(await cluster.ownerOf(`{${user}}`)).exists(`rl:v1:orders:user:{${user}}`)).toBe(1);
    const masters = (await cluster.topology()).shards.map((shard) => shard.masterPort);
    expect((await Promise.all(masters.map((port) => cluster.node(port).dbsize()))).reduce((a, b) => a + b, 0)).toBe(3);
    await stopService(started);
    expect(started.output().stdout).toContain(
      `"store":"redis cluster seeds ${seeds.map((seed) => seed.slice('rediss://'.length)).join(',')}","msg":"deciding in Redis"`,
    );
  });

  it('the cluster client verifies every node: with a wrong CA it never connects, and says why for each seed', async () => {
    const seeds = cluster.tlsSeeds.slice(0, 2);
    const reasons = new Map<string, string>();
    let store: RedisStore | undefined;
    await new Promise<void>((resolve) => {
      store = RedisStore.connectCluster(seeds, {
        tls: { ca: certificates.pem('other-ca.crt'), cert: certificates.pem('client.crt'), key: certificates.pem('client.key') },
        onConnectionError: (error, node) => {
          reasons.set(node, (error as NodeJS.ErrnoException).code ?? error.message);
          if (reasons.size === seeds.length) resolve();
        },
      });
    });
    await store!.close();
    expect(Object.fromEntries(reasons)).toEqual(Object.fromEntries(seeds.map((seed) => [seed.slice('rediss://'.length), 'SELF_SIGNED_CERT_IN_CHAIN'])));
  });

  it("the TLS options RedisStore was given, changed in place (a reload), apply from each node's next connection", async () => {
    const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
    const live = { ca: certificates.pem('ca.crt'), cert: certificates.pem('client.crt'), key: certificates.pem('client.key') };
    const store = RedisStore.connectCluster(cluster.tlsSeeds.slice(0, 2), { tls: live });
    // {a}, {b}, {c}: one key on each master (the first test of this block checks that).
    const decideOnEveryMaster = () => Promise.all(['a', 'b', 'c'].map((user) => decideLimit(store, bucket, identityKey('bucket', 'user', user), 1)));
    const admins = cluster.nodes.map((node) => ({ node, admin: cluster.node(node.port) }));
    const useServerCertificate = (name: string, ca: string) =>
      Promise.all(
        admins.map(({ admin }) =>
          admin.call('CONFIG', 'SET', 'tls-ca-cert-file', file(ca), 'tls-cert-file', file(`${name}.crt`), 'tls-key-file', file(`${name}.key`)),
        ),
      );
    try {
      await store.ready();
      await decideOnEveryMaster();
      // Every node now serves a certificate from the other CA (and, for its peers, trusts both),
      // which the loaded CA cannot verify; then the store's connections (to the TLS ports) drop.
      await useServerCertificate('redis-next', 'both-cas.crt');
      Object.assign(live, { ca: certificates.pem('both-cas.crt') });
      for (const { node, admin } of admins) {
        const list = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'normal'));
        const ids = [...list.matchAll(new RegExp(`^id=(\\d+) .*laddr=127\\.0\\.0\\.1:${node.tlsPort} `, 'gm'))].map((match) => match[1] as string);
        if (ids.length > 0) await admin.call('CLIENT', 'KILL', 'ID', ...ids);
      }
      const deadline = Date.now() + 15_000;
      let outcome = await decideOnEveryMaster().catch((error: unknown) => error);
      while (!Array.isArray(outcome) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        outcome = await decideOnEveryMaster().catch((error: unknown) => error);
      }
      expect(Array.isArray(outcome) ? 'decided' : String(outcome)).toBe('decided');
    } finally {
      await store.close();
      await useServerCertificate('redis', 'ca.crt');
    }
  });
});
