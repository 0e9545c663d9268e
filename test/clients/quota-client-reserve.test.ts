import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  createQuotaClient,
  QuotaInvalidArgumentError,
  QuotaRequestError,
  QuotaReservationNotFoundError,
  type QuotaClient,
  type QuotaClientOptions,
} from '@quota-service/client';
import { parsePolicies } from '@quota-service/core';
import { closedPort } from '../support/closed-port.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { rpcCounter } from '../support/rpc-counter.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

const redis = useRedisServer();

/** A bucket of 100 units that refills 1 per second: with time frozen, every remaining below is exact. */
const POLICIES = parsePolicies(
  stringify({ policies: { llm: { limits: [{ name: 'llm-tokens', key_by: 'user', algorithm: 'token_bucket', capacity: 100, refill_per_second: 1 }] } } }),
  'reserve test policies',
);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe.each(bothStores(redis))('reserve() and settle() against the service on the %s store', (_name, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  const clients: QuotaClient[] = [];
  const counter = rpcCounter();
  const connect = (options: Partial<QuotaClientOptions> = {}) => {
    const client = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000, middleware: counter.middleware, ...options });
    clients.push(client);
    return client;
  };
  const remaining = async (user: string) => (await service.client.getQuota({ policy: 'llm', identity: { user } })).limits[0]?.remaining;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store, POLICIES);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await service?.stop();
  });
  afterEach(async () => {
    counter.reset();
    await fixture.reset();
  });

  it('reserves the estimate at once; settling gives back what the work did not use; settling again changes nothing', async () => {
    const client = connect();
    const reservation = await client.reserve({ policy: 'llm', identity: { user: 'r1' }, estimate: 40 });
    expect(reservation).toMatchObject({ allowed: true, estimate: 40, decision: { allowed: true, source: 'store' } });
    expect(reservation.requestId).toMatch(UUID);
    expect(await remaining('r1')).toBe(60);

    expect(await reservation.settle(10)).toMatchObject({ status: 'settled', estimate: 40, actualCost: 10, delta: -30 });
    expect(await remaining('r1')).toBe(90);
    // The first settlement counts: a second one (even with another figure) answers it and sends nothing.
    expect(await reservation.settle(25)).toMatchObject({ status: 'already_settled', estimate: 40, actualCost: 10, delta: -30 });
    expect(await remaining('r1')).toBe(90);
    expect(counter.count('Settle')).toBe(1);
  });

  it('work that cost more than its estimate is charged the difference; the given requestId is the reservation', async () => {
    const client = connect();
    const reservation = await client.reserve({ policy: 'llm', identity: { user: 'r2' }, estimate: 20, requestId: 'job-7' });
    expect(reservation.requestId).toBe('job-7');
    expect(await reservation.settle(50)).toMatchObject({ status: 'settled', actualCost: 50, delta: 30 });
    expect(await remaining('r2')).toBe(50);
  });

  it('two handles of one reservation (same requestId): the second settlement is already_settled by the service', async () => {
    const client = connect();
    const first = await client.reserve({ policy: 'llm', identity: { user: 'r3' }, estimate: 30, requestId: 'twice' });
    const retry = await client.reserve({ policy: 'llm', identity: { user: 'r3' }, estimate: 30, requestId: 'twice' });
    expect(await remaining('r3')).toBe(70);
    expect(await first.settle(0)).toMatchObject({ status: 'settled', delta: -30 });
    expect(await retry.settle(30)).toMatchObject({ status: 'already_settled', actualCost: 0, delta: -30 });
    expect(await remaining('r3')).toBe(100);
  });

  it('a bad actual cost is refused before anything is sent, naming the field', async () => {
    const client = connect();
    const reservation = await client.reserve({ policy: 'llm', identity: { user: 'r4' }, estimate: 5 });
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const error = await reservation.settle(bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QuotaInvalidArgumentError);
      expect((error as QuotaInvalidArgumentError).details).toMatch(/^actual_cost: /);
    }
    expect(counter.count('Settle')).toBe(0);
    expect(await remaining('r4')).toBe(95);
  });

  it('a denied reservation has nothing to settle: settle() rejects with FAILED_PRECONDITION and sends nothing', async () => {
    const client = connect();
    await client.reserve({ policy: 'llm', identity: { user: 'r5' }, estimate: 90 });
    const denied = await client.reserve({ policy: 'llm', identity: { user: 'r5' }, estimate: 20 });
    expect(denied).toMatchObject({ allowed: false, decision: { deniedBy: 'llm-tokens' } });
    const error = await denied.settle(0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuotaRequestError);
    expect((error as QuotaRequestError).code).toBe(9); // FAILED_PRECONDITION
    expect(counter.count('Settle')).toBe(0);
  });

  it('a reservation the service no longer knows (its record expired or was lost) is NOT_FOUND: QuotaReservationNotFoundError', async () => {
    const client = connect();
    const reservation = await client.reserve({ policy: 'llm', identity: { user: 'r6' }, estimate: 10 });
    // The store forgets everything, the reservation's record included.
    await fixture.reset();
    const error = await reservation.settle(1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuotaReservationNotFoundError);
    expect(counter.count('Settle')).toBe(1);
  });
});

describe('reserve() when the service cannot be asked', () => {
  const clients: QuotaClient[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
  });
  const unreachable = async (options: Partial<QuotaClientOptions>) => {
    const client = createQuotaClient({ address: `127.0.0.1:${await closedPort()}`, deadlineMs: 500, batch: false, ...options });
    clients.push(client);
    return client;
  };

  it("follows the client's failure policy; a reservation the service never saw settles as not_counted, sending nothing", async () => {
    const open = await unreachable({ onUnavailable: 'fail_open' });
    const granted = await open.reserve({ policy: 'llm', identity: { user: 'x' }, estimate: 10 });
    expect(granted).toMatchObject({ allowed: true, decision: { source: 'fail_open' } });
    expect(await granted.settle(3)).toEqual({ status: 'not_counted', estimate: 10, actualCost: 3, delta: 0, limits: [] });

    const closed = await unreachable({ onUnavailable: 'fail_closed' });
    expect(await closed.reserve({ policy: 'llm', identity: { user: 'x' }, estimate: 10 })).toMatchObject({
      allowed: false,
      decision: { source: 'fail_closed' },
    });
  });
});
