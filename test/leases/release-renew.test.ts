import { ClientError, Status } from 'nice-grpc';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parsePolicies } from '@quota-service/core';
import type { QuotaServiceClient } from '@quota-service/contract';
import { startTestService, type TestService } from '../support/quota-service.js';
import { clusterFixture, memoryFixture, redisFixture, type StoreFixture } from '../support/store-fixtures.js';
import { useRedisCluster, useRedisServer } from '../support/use-redis.js';

/**
 * Allow acquiring leases, Release and Renew, over a real gRPC service on the
 * embedded store, a single Redis node and a 3+3 Redis Cluster (where the
 * tenant's lease set and the user's bucket sit in different slots), all on
 * virtual time.
 */
const TTL = 30_000;
const policies = parsePolicies(
  stringify({
    policies: {
      jobs: {
        limits: [
          { name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 2, lease_ttl_ms: TTL },
          { name: 'jobs-per-user', key_by: 'user', algorithm: 'token_bucket', capacity: 3, refill_per_second: 0.001 },
        ],
      },
      plain: { limits: [{ name: 'plain', key_by: 'user', algorithm: 'token_bucket', capacity: 5, refill_per_second: 1 }] },
    },
  }),
);

const acme = (user: string) => ({ tenant: 'acme', user });

interface LeaseRequest {
  policy: string;
  identity: Record<string, string>;
  requestId: string;
}

async function grpcError(call: Promise<unknown>): Promise<ClientError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ClientError)) throw new Error(`expected a gRPC error, got ${JSON.stringify(error)}`);
  return error;
}

describe.each(['memory', 'redis', 'redis-cluster'] as const)('leases over gRPC on %s', (kind) => {
  const redis = useRedisServer();
  const cluster = kind === 'redis-cluster' ? useRedisCluster() : undefined;
  let fixture: StoreFixture;
  let service: TestService;
  let client: QuotaServiceClient;
  beforeAll(async () => {
    fixture = kind === 'memory' ? memoryFixture() : kind === 'redis' ? redisFixture(redis()) : clusterFixture(cluster!());
    service = await startTestService(fixture.store, policies);
    client = service.client;
  });
  afterAll(async () => {
    await service?.stop();
    await fixture?.store.close();
  });
  beforeEach(async () => {
    await fixture.reset();
  });

  const allow = (user: string, requestId: string) => client.allow({ policy: 'jobs', identity: acme(user), cost: 1, requestId });
  const held = async () => (await client.getQuota({ policy: 'jobs', identity: acme('nobody') })).limits[0]!;

  it('an Allow acquires a lease: at most limit held, lease_expires_in_ms, GetQuota held and free', async () => {
    expect(await allow('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: TTL });
    fixture.clock.advance(1_000);
    expect(await allow('u2', 'b')).toMatchObject({ allowed: true, leaseExpiresInMs: TTL });
    // The third is denied until the first lease expires, at the latest.
    expect(await allow('u3', 'c')).toMatchObject({ allowed: false, deniedBy: 'jobs-in-flight', retryAfterMs: TTL - 1_000, leaseExpiresInMs: 0 });
    expect(await held()).toMatchObject({ name: 'jobs-in-flight', algorithm: 'concurrency', limit: 2, remaining: 0, leasesHeld: 2 });
    // A retry with the same request id is the same lease.
    expect(await allow('u1', 'a')).toMatchObject({ allowed: true });
    expect((await held()).leasesHeld).toBe(2);
  });

  it('a retry with the same request_id answers its lease as held now: its time left; released or expired, acquired again when there is room, else denied', async () => {
    const userBucket = async () => (await client.getQuota({ policy: 'jobs', identity: acme('u1') })).limits[1]!.remaining;
    expect(await allow('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: TTL });
    fixture.clock.advance(1_000);
    // Still held: the same lease, with the time it has left.
    expect(await allow('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: TTL - 1_000 });
    expect((await held()).leasesHeld).toBe(1);

    // Released: the retry holds it again, and the user's bucket is not spent again.
    expect(await client.release({ policy: 'jobs', identity: acme('u1'), requestId: 'a' })).toMatchObject({ released: true });
    expect((await held()).leasesHeld).toBe(0);
    expect(Math.floor(await userBucket())).toBe(2);
    expect(await allow('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: TTL });
    expect((await held()).leasesHeld).toBe(1);
    expect(Math.floor(await userBucket())).toBe(2);

    // Released while the others filled the set: the retry is denied by the lease limit and holds nothing.
    expect((await allow('u2', 'b')).allowed).toBe(true);
    await client.release({ policy: 'jobs', identity: acme('u1'), requestId: 'a' });
    expect((await allow('u3', 'c')).allowed).toBe(true);
    expect(await allow('u1', 'a')).toMatchObject({ allowed: false, deniedBy: 'jobs-in-flight', retryAfterMs: TTL, leaseExpiresInMs: 0 });
    expect((await held()).leasesHeld).toBe(2);

    // Expired (within request_id_ttl_ms): acquired again.
    fixture.clock.advance(TTL);
    expect((await held()).leasesHeld).toBe(0);
    expect(await allow('u1', 'a')).toMatchObject({ allowed: true, leaseExpiresInMs: TTL });
    expect((await held()).leasesHeld).toBe(1);
    expect(Math.floor(await userBucket())).toBe(2);
    // A denied first answer is answered again as it was: no lease.
    expect(await allow('u3', 'd')).toMatchObject({ allowed: true });
    expect(await allow('u2', 'e')).toMatchObject({ allowed: false, deniedBy: 'jobs-in-flight' });
    await client.release({ policy: 'jobs', identity: acme('u3'), requestId: 'd' });
    expect(await allow('u2', 'e')).toMatchObject({ allowed: false, deniedBy: 'jobs-in-flight' });
    expect((await held()).leasesHeld).toBe(1);
  });

  it('Release frees the lease once; a lease never held is released = false and nothing changes', async () => {
    await allow('u1', 'a');
    const before = await fixture.keys();
    expect(await client.release({ policy: 'jobs', identity: acme('u1'), requestId: 'never' })).toMatchObject({ released: false });
    expect(await fixture.keys()).toEqual(before);
    const released = await client.release({ policy: 'jobs', identity: acme('u1'), requestId: 'a' });
    expect(released.released).toBe(true);
    expect(released.limits.map((l) => [l.name, l.leasesHeld, l.remaining])).toEqual([
      ['jobs-in-flight', 0, 2],
      ['jobs-per-user', 0, 2],
    ]);
    expect(await client.release({ policy: 'jobs', identity: acme('u1'), requestId: 'a' })).toMatchObject({ released: false });
    expect((await held()).leasesHeld).toBe(0);
  });

  it('Renew extends a held lease to lease_ttl_ms from now; a lost one is NOT_FOUND', async () => {
    await allow('u1', 'a');
    fixture.clock.advance(TTL - 1);
    expect(await client.renew({ policy: 'jobs', identity: acme('u1'), requestId: 'a' })).toEqual({ leaseExpiresInMs: TTL });
    fixture.clock.advance(TTL - 1);
    expect((await held()).leasesHeld, 'held until lease_ttl_ms after the renewal').toBe(1);
    fixture.clock.advance(1);
    expect((await held()).leasesHeld, 'expired at lease_ttl_ms after the renewal').toBe(0);
    const lost = await grpcError(client.renew({ policy: 'jobs', identity: acme('u1'), requestId: 'a' }));
    expect(lost.code).toBe(Status.NOT_FOUND);
    expect(lost.details).toMatch(/^request_id: no lease held/);
    expect(await client.release({ policy: 'jobs', identity: acme('u1'), requestId: 'a' })).toMatchObject({ released: false });
  });

  it("another identity sharing the tenant cannot release or renew a lease with the holder's request_id", async () => {
    await allow('u1', 'shared-id');
    expect(await client.release({ policy: 'jobs', identity: acme('u2'), requestId: 'shared-id' })).toMatchObject({ released: false });
    expect((await grpcError(client.renew({ policy: 'jobs', identity: acme('u2'), requestId: 'shared-id' }))).code).toBe(Status.NOT_FOUND);
    expect((await held()).leasesHeld, "the holder's lease is still held").toBe(1);
    // The same request id from u2 is u2's own lease.
    expect(await allow('u2', 'shared-id')).toMatchObject({ allowed: true });
    expect((await held()).leasesHeld).toBe(2);
  });

  it('all or nothing with the other limit: a request either limit denies spends on neither', async () => {
    expect((await allow('u1', '1')).allowed).toBe(true);
    expect((await allow('u1', '2')).allowed).toBe(true);
    // The lease set is full: denied, and the bucket keeps its last unit.
    expect(await allow('u1', '3')).toMatchObject({ allowed: false, deniedBy: 'jobs-in-flight' });
    await client.release({ policy: 'jobs', identity: acme('u1'), requestId: '1' });
    expect(await allow('u1', '4')).toMatchObject({ allowed: true });
    await client.release({ policy: 'jobs', identity: acme('u1'), requestId: '2' });
    // The bucket is empty now: denied, and no lease is taken.
    expect(await allow('u1', '5')).toMatchObject({ allowed: false, deniedBy: 'jobs-per-user' });
    expect((await held()).leasesHeld, 'only the lease of request 4').toBe(1);
  });

  it('ListPolicies shows the concurrency limit as its oneof member', async () => {
    const { policies: listed } = await client.listPolicies({});
    expect(listed.find((p) => p.name === 'jobs')?.limits[0]).toMatchObject({
      name: 'jobs-in-flight',
      keyBy: 'tenant',
      concurrency: { limit: 2, leaseTtlMs: TTL },
    });
  });

  it('bad input: no request_id on Allow, Release or Renew; a policy without a concurrency limit; nothing written', async () => {
    const noId = await grpcError(client.allow({ policy: 'jobs', identity: acme('u1'), cost: 1, requestId: '' }));
    expect([noId.code, noId.details]).toEqual([Status.INVALID_ARGUMENT, expect.stringMatching(/^request_id: required by limit "jobs-in-flight"/)]);
    const calls = [(r: LeaseRequest) => client.release(r), (r: LeaseRequest) => client.renew(r)];
    for (const call of calls) {
      const error = await grpcError(call({ policy: 'jobs', identity: acme('u1'), requestId: '' }));
      expect([error.code, error.details]).toEqual([Status.INVALID_ARGUMENT, 'request_id: must not be empty']);
      const plain = await grpcError(call({ policy: 'plain', identity: { user: 'u1' }, requestId: 'a' }));
      expect([plain.code, plain.details]).toEqual([Status.FAILED_PRECONDITION, expect.stringMatching(/policy "plain" has no concurrency limit/)]);
      const missing = await grpcError(call({ policy: 'jobs', identity: { user: 'u1' }, requestId: 'a' }));
      expect([missing.code, missing.details]).toEqual([Status.INVALID_ARGUMENT, expect.stringMatching(/^identity\.tenant: required/)]);
      expect((await grpcError(call({ policy: 'nope', identity: acme('u1'), requestId: 'a' }))).code).toBe(Status.NOT_FOUND);
    }
    expect(await fixture.keys()).toEqual([]);
  });
});
