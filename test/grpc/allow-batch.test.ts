import { ClientError, Status } from 'nice-grpc';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DecisionSource, type AllowRequest } from '@quota-service/contract';
import { MAX_BATCH_SIZE } from '../../src/api/quota/quota-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();
const order = (user: string, extra: Partial<AllowRequest> = {}): AllowRequest => ({
  policy: 'orders',
  identity: { user },
  cost: 0,
  requestId: '',
  deadlineMs: 0,
  sentAtUnixMs: 0,
  ...extra,
});

describe.each(bothStores(redis))('AllowBatch on the %s store', (_name, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store);
  });
  afterAll(async () => {
    await service?.stop();
  });
  afterEach(async () => {
    await fixture.reset();
  });

  it('answers in request order, each request decided independently as Allow would', async () => {
    // 11 for user a (the 11th is denied by its bucket of 10), interleaved with 3 for user b.
    const requests = [...Array.from({ length: 11 }, () => order('a'))];
    requests.splice(3, 0, order('b'));
    requests.splice(7, 0, order('b', { cost: 4 }));
    requests.push(order('b'));
    const { results } = await service.client.allowBatch({ requests });
    expect(results).toHaveLength(14);

    const remainingA = results.filter((_, i) => requests[i]!.identity.user === 'a').map((r) => r.response?.limits[0]?.remaining);
    expect(remainingA).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
    const lastA = results[12]!.response!;
    expect(lastA).toMatchObject({ allowed: false, deniedBy: 'orders' });
    expect(lastA.retryAfterMs).toBe(500);
    expect(results.filter((_, i) => requests[i]!.identity.user === 'b').map((r) => r.response?.limits[0]?.remaining)).toEqual([9, 5, 4]);
    expect(results.every((r) => r.error === undefined)).toBe(true);
    expect(await fixture.tokenBucket('rl:v1:orders:user:{a}')).toMatchObject({ tokens: 0 });
  });

  it('a bad item fails only itself, with the status Allow would give and the field named inside the batch', async () => {
    const { results } = await service.client.allowBatch({
      requests: [
        order('x'),
        order('y', { policy: 'nope' }),
        order('x'),
        order('z', { cost: -1 }),
        order('z', { identity: { tenant: 'acme' } }),
        order('x', { cost: 11 }),
        order('x'),
      ],
    });
    expect(results.map((r) => r.response?.limits[0]?.remaining)).toEqual([9, undefined, 8, undefined, undefined, undefined, 7]);
    expect(results[1]!.error).toEqual({ code: Status.NOT_FOUND, message: 'requests[1].policy: no policy named "nope"' });
    expect(results[3]!.error).toEqual({ code: Status.INVALID_ARGUMENT, message: 'requests[3].cost: must not be negative, got -1' });
    expect(results[4]!.error).toEqual({
      code: Status.INVALID_ARGUMENT,
      message: 'requests[4].identity.user: required by limit "orders" of policy "orders"',
    });
    expect(results[5]!.error?.code).toBe(Status.INVALID_ARGUMENT);
    expect(results[5]!.error?.message).toMatch(/^requests\[5\]\.cost: 11 exceeds the bucket's capacity of 10/);
    // Only user x's bucket exists: the bad items wrote nothing.
    expect(await fixture.keys()).toEqual(['rl:v1:orders:user:{x}']);
  });

  it('an empty batch is an empty answer', async () => {
    expect(await service.client.allowBatch({ requests: [] })).toEqual({ results: [] });
  });

  it(`a batch over ${MAX_BATCH_SIZE} requests is rejected whole with INVALID_ARGUMENT, nothing written`, async () => {
    const requests = Array.from({ length: MAX_BATCH_SIZE + 1 }, (_, i) => order(`u${i}`));
    const error = await service.client.allowBatch({ requests }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).code).toBe(Status.INVALID_ARGUMENT);
    expect((error as ClientError).details).toBe(`requests: at most ${MAX_BATCH_SIZE} per batch, got ${MAX_BATCH_SIZE + 1}`);
    expect(await fixture.keys()).toEqual([]);

    const full = await service.client.allowBatch({ requests: requests.slice(0, MAX_BATCH_SIZE) });
    expect(full.results.filter((r) => r.response?.allowed === true)).toHaveLength(MAX_BATCH_SIZE);
  });
});

describe('AllowBatch with the store down', () => {
  let own: RedisServer | undefined;
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.stop();
    await own?.stop();
  });

  it("every item gets its policy's failure-mode decision on its own; a bad item still gets its own code", async () => {
    own = await startRedisServer();
    const store = RedisStore.connect(own.url);
    service = await startTestService(store);
    await own.stop();
    const { results } = await service.client.allowBatch({ requests: [order('a'), order('b', { policy: 'nope' }), order('c')] });
    // The shipped `orders` policy fails over to its local share (docs/operations.md).
    expect(results).toMatchObject([
      { response: { allowed: true, source: DecisionSource.DECISION_SOURCE_LOCAL } },
      { error: { code: Status.NOT_FOUND, message: 'requests[1].policy: no policy named "nope"' } },
      { response: { allowed: true, source: DecisionSource.DECISION_SOURCE_LOCAL } },
    ]);
    await store.close();
  });
});
