import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { createQuotaClient, LeaseLostError, type QuotaClient, type QuotaClientOptions } from '@quota-service/client';
import { parsePolicies } from '@quota-service/core';
import { MemoryStore } from '../../src/store/memory.js';
import { closedPort } from '../support/closed-port.js';
import { startTestService, type TestService } from '../support/quota-service.js';
import { rpcCounter } from '../support/rpc-counter.js';
import { type StoreFixture, T0 } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';
import { VirtualTimers } from '../support/virtual-timers.js';
import { VirtualClock } from '@quota-service/core';

const redis = useRedisServer();
const TTL = 3_000;
/** Two jobs per tenant at once; a lease lives 3 s unless renewed. */
const POLICIES = parsePolicies(
  stringify({
    policies: { jobs: { limits: [{ name: 'jobs-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 2, lease_ttl_ms: TTL }] } },
  }),
  'lease test policies',
);

describe.each(bothStores(redis))('acquire() against the service on the %s store', (_name, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  const clients: QuotaClient[] = [];
  const counter = rpcCounter();
  // The client's lease timers and the store's clock are both virtual: renewals happen
  // when the test moves the client's time, expiry when it moves the store's.
  let timers: VirtualTimers;
  const connect = (options: Partial<QuotaClientOptions> = {}) => {
    const client = createQuotaClient({
      address: `127.0.0.1:${service.server.port}`,
      deadlineMs: 5_000,
      middleware: counter.middleware,
      leaseTimers: timers,
      ...options,
    });
    clients.push(client);
    return client;
  };
  const held = async (tenant: string) => (await service.client.getQuota({ policy: 'jobs', identity: { tenant } })).limits[0]?.leasesHeld;
  /** Both clocks forward by `ms`. */
  const advance = (ms: number) => {
    fixture.clock.advance(ms);
    timers.advance(ms);
  };
  beforeAll(async () => {
    timers = new VirtualTimers(T0);
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

  it('grants up to the limit, denies the next with the limit named, and a released lease frees its place', async () => {
    const client = connect();
    const first = await client.acquire({ policy: 'jobs', identity: { tenant: 'l1' } });
    const second = await client.acquire({ policy: 'jobs', identity: { tenant: 'l1' } });
    const third = await client.acquire({ policy: 'jobs', identity: { tenant: 'l1' } });
    expect([first.acquired, second.acquired, third.acquired]).toEqual([true, true, false]);
    expect([first.held, third.held]).toEqual([true, false]);
    expect(first.decision.source).toBe('store');
    expect(third.decision).toMatchObject({ allowed: false, deniedBy: 'jobs-in-flight', source: 'store' });
    expect(await third.release()).toEqual({ status: 'not_counted' });
    expect(await held('l1')).toBe(2);

    expect(await first.release()).toEqual({ status: 'released' });
    expect(first.held).toBe(false);
    // Twice is safe: the same answer, one Release sent.
    expect(await first.release()).toEqual({ status: 'released' });
    expect(counter.count('Release')).toBe(1);
    expect(await held('l1')).toBe(1);
    const fourth = await client.acquire({ policy: 'jobs', identity: { tenant: 'l1' } });
    expect(fourth.acquired).toBe(true);
    await Promise.all([second.release(), fourth.release()]);
  });

  it('`await using` releases the lease when the block ends, also when it throws', async () => {
    const client = connect();
    {
      await using lease = await client.acquire({ policy: 'jobs', identity: { tenant: 'l2' } });
      expect(lease.held).toBe(true);
      expect(await held('l2')).toBe(1);
    }
    expect(await held('l2')).toBe(0);
    const work = async () => {
      await using lease = await client.acquire({ policy: 'jobs', identity: { tenant: 'l2' } });
      expect(lease.acquired).toBe(true);
      throw new Error('the work failed');
    };
    await expect(work()).rejects.toThrow('the work failed');
    expect(await held('l2')).toBe(0);
  });

  it('renews itself a third of the way into its time, so it outlives its TTL while held', async () => {
    const client = connect();
    const lease = await client.acquire({ policy: 'jobs', identity: { tenant: 'l3' } });
    expect(timers.pending()).toEqual([timers.now() + TTL / 3]);
    advance(TTL / 3 - 1);
    expect(counter.count('Renew')).toBe(0);
    advance(1);
    await vi.waitFor(() => expect(counter.finished('Renew')).toBe(1));
    await vi.waitFor(() => expect(timers.pending()).toHaveLength(1));
    // Well past the first TTL: still held, thanks to the renewals.
    for (let i = 0; i < 6; i++) {
      advance(TTL / 3);
      await vi.waitFor(() => expect(counter.finished('Renew')).toBe(i + 2));
      await vi.waitFor(() => expect(timers.pending()).toHaveLength(1));
    }
    expect(await held('l3')).toBe(1);
    expect(lease.held).toBe(true);
    await lease.release();
    expect(timers.pending()).toEqual([]);
  });

  it('a lease that expired on the store is lost at its next renewal: signal aborted with LeaseLostError, held false', async () => {
    const client = connect();
    const lease = await client.acquire({ policy: 'jobs', identity: { tenant: 'l4' } });
    // The store's clock runs past the TTL before the client's renewal falls due (a stalled process).
    fixture.clock.advance(TTL + 1);
    expect(await held('l4')).toBe(0);
    expect(lease.signal.aborted).toBe(false);
    timers.advance(TTL / 3);
    await vi.waitFor(() => expect(lease.signal.aborted).toBe(true));
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lease.signal.reason).toMatchObject({ reason: 'not_held', policy: 'jobs', requestId: lease.requestId });
    expect(lease.held).toBe(false);
    expect(timers.pending()).toEqual([]);
    // Nothing to release: the service said so.
    expect(await lease.release()).toEqual({ status: 'not_held' });
    expect(counter.count('Release')).toBe(0);
  });
});

describe('acquire() when the service cannot be asked', () => {
  const clients: QuotaClient[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
  });
  const unreachable = async (options: Partial<QuotaClientOptions>) => {
    const client = createQuotaClient({ address: `127.0.0.1:${await closedPort()}`, deadlineMs: 500, batch: false, ...options });
    clients.push(client);
    return client;
  };

  it("fails closed by default, whatever allow()'s failure policy; leaseOnUnavailable (or the call's onUnavailable) can grant an uncounted lease", async () => {
    const client = await unreachable({ onUnavailable: 'fail_open' });
    expect((await client.allow({ policy: 'jobs', identity: { tenant: 'u' } })).allowed).toBe(true);
    const refused = await client.acquire({ policy: 'jobs', identity: { tenant: 'u' } });
    expect(refused).toMatchObject({ acquired: false, held: false, decision: { allowed: false, source: 'fail_closed' } });

    const open = await client.acquire({ policy: 'jobs', identity: { tenant: 'u' } }, { onUnavailable: 'fail_open' });
    expect(open).toMatchObject({ acquired: true, held: true, decision: { source: 'fail_open' } });
    expect(await open.release()).toEqual({ status: 'not_counted' });

    const openClient = await unreachable({ leaseOnUnavailable: 'fail_open' });
    expect((await openClient.acquire({ policy: 'jobs', identity: { tenant: 'u' } })).decision.source).toBe('fail_open');
  });

  it('a held lease whose renewals cannot reach the service is lost once its time is up, and not before', async () => {
    const timers = new VirtualTimers(T0);
    const service: TestService = await startTestService(new MemoryStore(new VirtualClock(T0)), POLICIES);
    const client = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 500, batch: false, leaseTimers: timers });
    clients.push(client);
    const lease = await client.acquire({ policy: 'jobs', identity: { tenant: 'gone' } });
    const expiresAt = T0 + TTL;
    await service.stop();
    // Renewals fail; each failure schedules another attempt before the lease's time is up.
    while (timers.now() < expiresAt) {
      const [due] = timers.pending();
      expect(due, 'a renewal attempt is always scheduled while held').toBeDefined();
      expect(due!).toBeLessThanOrEqual(expiresAt);
      timers.advance(due! - timers.now());
      await vi.waitFor(() => expect(timers.pending().length + (lease.signal.aborted ? 1 : 0)).toBe(1), { timeout: 5_000 });
      if (timers.now() < expiresAt) expect(lease.signal.aborted, `lost early, at ${timers.now() - T0} ms`).toBe(false);
    }
    await vi.waitFor(() => expect(lease.signal.aborted).toBe(true), { timeout: 5_000 });
    expect(lease.signal.reason).toMatchObject({ name: 'LeaseLostError', reason: 'expired' });
    expect(lease.held).toBe(false);
  });
});
