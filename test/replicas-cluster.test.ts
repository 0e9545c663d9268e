import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createChannel, createClient, type Channel } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition, type AllowRequest, type AllowResponse, type QuotaServiceClient } from '@quota-service/contract';
import { keySlot } from '../src/store/redis/key-slot.js';
import { startRedisCluster, type RedisCluster } from './support/redis-cluster.js';
import { startServiceProcess, untilServing, type ServiceProcess } from './support/service-process.js';

/**
 * Three service processes on one Redis Cluster, as QUOTA_REDIS_CLUSTER
 * configures them, each batching its decisions per master: 300 simultaneous
 * requests for one user with one token's worth left (unary Allow and
 * AllowBatch items, spread over the three) grant exactly one. For the user +
 * tenant policy the user's bucket and the tenant's window live on different
 * masters: the reservations of the 299 denied requests are all given back.
 */
const REPLICAS = 3;
const SIMULTANEOUS = 300;

let cluster: RedisCluster;
let services: ServiceProcess[] = [];
let channels: Channel[] = [];
let clients: QuotaServiceClient[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster();
  const dir = mkdtempSync(join(tmpdir(), 'quota-replicas-cluster-'));
  const policies = join(dir, 'policies.yaml');
  // A bucket that refills one token in about 17 minutes: none comes back during the test.
  writeFileSync(
    policies,
    `policies:
  one:
    failure_mode: fail_closed
    limits:
      - { name: one, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 0.001 }
  pair:
    failure_mode: fail_closed
    limits:
      - { name: pair-user, key_by: user, algorithm: token_bucket, capacity: 10, refill_per_second: 0.001 }
      - { name: pair-tenant, key_by: tenant, algorithm: fixed_window, limit: 100000, window: hour }
`,
  );
  services = Array.from({ length: REPLICAS }, () =>
    startServiceProcess({ QUOTA_REDIS_CLUSTER: cluster.seeds.join(','), QUOTA_POLICIES: policies, QUOTA_STORE_TIMEOUT_MS: '20000' }),
  );
  const ports = await Promise.all(services.map((s) => s.port));
  channels = ports.map((port) => createChannel(`127.0.0.1:${port}`));
  await Promise.all(channels.map((channel) => untilServing(channel, 'quota.v1.QuotaService')));
  clients = channels.map((channel) => createClient(QuotaServiceDefinition, channel));
}, 90_000);

afterAll(async () => {
  channels.forEach((channel) => channel.close());
  services.forEach((service) => service.signal('SIGKILL'));
  await Promise.all(services.map((service) => service.exit));
  await cluster?.stop();
});

/** SIMULTANEOUS requests over the replicas, half as unary Allow and half as AllowBatch items, all sent at once. */
async function race(request: AllowRequest): Promise<AllowResponse[]> {
  const perReplica = SIMULTANEOUS / REPLICAS;
  const unary = perReplica / 2;
  const sent = clients.flatMap((client) => [
    ...Array.from({ length: unary }, () => client.allow(request)),
    client.allowBatch({ requests: Array.from({ length: perReplica - unary }, () => request) }).then(({ results }) =>
      results.map((result) => {
        if (result.response === undefined) throw new Error(`batch item failed: ${JSON.stringify(result.error)}`);
        return result.response;
      }),
    ),
  ]);
  const answers = (await Promise.all(sent)).flat();
  expect(answers).toHaveLength(SIMULTANEOUS);
  expect(new Set(answers.map((a) => a.source))).toEqual(new Set([DecisionSource.DECISION_SOURCE_STORE]));
  return answers;
}

describe('three service replicas on a Redis Cluster', () => {
  it(`one token left, ${SIMULTANEOUS} simultaneous requests for one user (Allow and AllowBatch): exactly one granted`, async () => {
    const identity = { user: 'race-one' };
    expect((await clients[0]!.allow({ policy: 'one', identity, cost: 9, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 })).allowed).toBe(true);
    const answers = await race({ policy: 'one', identity, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
    expect(answers.filter((a) => a.allowed)).toHaveLength(1);
    expect(answers.filter((a) => !a.allowed).every((a) => a.deniedBy === 'one')).toBe(true);
  });

  it(`user + tenant on two masters, one token left: exactly one granted, and the tenant's window counts only that one`, async () => {
    const identity = { user: 'race-pair', tenant: 'race-tenant' };
    expect(await cluster.ownerOf('{race-pair}')).not.toBe(await cluster.ownerOf('{race-tenant}'));
    // The tenant's slot comes first: every request reserves on the tenant's window, then meets the user's bucket.
    expect(keySlot('{race-tenant}')).toBeLessThan(keySlot('{race-pair}'));
    expect((await clients[1]!.allow({ policy: 'pair', identity, cost: 9, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 })).allowed).toBe(true);
    const answers = await race({ policy: 'pair', identity, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
    expect(answers.filter((a) => a.allowed)).toHaveLength(1);
    expect(answers.filter((a) => !a.allowed).every((a) => a.deniedBy === 'pair-user')).toBe(true);
    // 9 + 1 spent on the tenant's window: every reservation of a denied request was refunded.
    const quota = await clients[2]!.getQuota({ policy: 'pair', identity });
    const [user, tenant] = quota.limits;
    expect(tenant).toMatchObject({ name: 'pair-tenant', remaining: 100_000 - 10 });
    // Less than the one token a grant takes (it refills on Redis's clock, a little since).
    expect(user).toMatchObject({ name: 'pair-user' });
    expect(user!.remaining).toBeLessThan(1);
  });
});
