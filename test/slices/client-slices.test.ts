import type { CallOptions, ClientMiddlewareCall } from 'nice-grpc';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createQuotaClient, type QuotaClientOptions } from '@quota-service/client';
import { parsePolicies } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startTestService } from '../support/quota-service.js';
import { rpcCounter } from '../support/rpc-counter.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * The quota client's slices: for a policy whose limits have slices, a hot
 * identity's Allows are decided in the client's process (source 'slice'),
 * taking and giving back slices with TakeSlice; with `slices: false`, for a
 * policy without slices and for requests with a request id, every Allow goes
 * to the service.
 */
const policies = parsePolicies(
  stringify({
    policies: {
      tenant: {
        limits: [
          {
            name: 'tenant',
            key_by: 'tenant',
            algorithm: 'token_bucket',
            capacity: 10_000,
            refill_per_second: 1_000,
            slices: { share: 0.05, max_units: 50, ttl_ms: 250 },
          },
        ],
      },
      plain: { limits: [{ name: 'plain', key_by: 'tenant', algorithm: 'token_bucket', capacity: 10_000, refill_per_second: 1_000 }] },
    },
  }),
);

describe('the quota client decides hot identities from slices', () => {
  const redis = useRedisServer();

  async function run(policy: string, options: Partial<QuotaClientOptions> = {}, requestId = false) {
    const store = RedisStore.connect(redis().url);
    const service = await startTestService(store, policies);
    const counter = rpcCounter();
    const client = createQuotaClient({
      address: `127.0.0.1:${service.server.port}`,
      deadlineMs: 5_000,
      middleware: counter.middleware,
      batch: false,
      ...options,
    });
    try {
      // The client reads ListPolicies in the background at start.
      for (let i = 0; i < 100 && counter.count('ListPolicies') === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const sources = new Map<string, number>();
      for (let i = 0; i < 300; i++) {
        const decision = await client.allow({ policy, identity: { tenant: `acme-${policy}` }, ...(requestId ? { requestId: `r-${i}` } : {}) });
        expect(decision.allowed).toBe(true);
        sources.set(decision.source, (sources.get(decision.source) ?? 0) + 1);
        if (i % 25 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      await client.close();
      // Everything given back: the bucket holds what the 300 decisions spent, less its refill.
      const peek = await service.client.getQuota({ policy, identity: { tenant: `acme-${policy}` } });
      return { sources, allows: counter.count('Allow'), slices: counter.count('TakeSlice'), remaining: peek.limits[0]!.remaining };
    } finally {
      await service.stop();
      await store.close();
    }
  }

  it('a hot identity: most Allows are decided in the client, with a TakeSlice call per slice', async () => {
    const { sources, allows, slices, remaining } = await run('tenant');
    expect(sources.get('slice')).toBeGreaterThan(200);
    expect(allows).toBeLessThan(100);
    expect(slices).toBeGreaterThan(0);
    expect(slices).toBeLessThan(50);
    // 300 units granted in all, none lost: what is missing from the full bucket is at most 300 (less the refill meanwhile).
    expect(remaining).toBeGreaterThanOrEqual(10_000 - 300);
  });

  it('requests a slice cannot pay while the next one is on its way wait for it instead of asking the service', async () => {
    const store = RedisStore.connect(redis().url);
    const service = await startTestService(store, policies);
    const counter = rpcCounter();
    const client = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000, middleware: counter.middleware, batch: false });
    try {
      for (let i = 0; i < 100 && counter.count('ListPolicies') === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      const identity = { tenant: 'acme-waits' };
      // Hot until the first decision from a slice: it tells what the slice has left.
      let first = await client.allow({ policy: 'tenant', identity });
      for (let i = 0; i < 100 && first.source !== 'slice'; i++) first = await client.allow({ policy: 'tenant', identity });
      expect(first.source).toBe('slice');
      const left = first.limits[0]!.remaining;
      const allowsBefore = counter.count('Allow');
      // All in one turn: the slice pays `left` of them; past half of it the next slice is
      // asked for, and the 10 it cannot pay wait for that one.
      const decisions = await Promise.all(Array.from({ length: left + 10 }, () => client.allow({ policy: 'tenant', identity })));
      expect(decisions.every((d) => d.allowed && d.source === 'slice')).toBe(true);
      expect(counter.count('Allow')).toBe(allowsBefore);
      expect(counter.count('TakeSlice')).toBe(2);
    } finally {
      await client.close();
      await service.stop();
      await store.close();
    }
  });

  it('slices are taken and given back for the identity they were asked for, though the caller changes its object after', async () => {
    const store = RedisStore.connect(redis().url);
    const service = await startTestService(store, policies);
    const takes: Array<{ identity: Record<string, string>; giveBackOnly: boolean }> = [];
    async function* recorder<Request, Response>(call: ClientMiddlewareCall<Request, Response>, options: CallOptions) {
      if (call.method.path.endsWith('/TakeSlice')) takes.push(structuredClone(call.request) as never);
      return yield* call.next(call.request as never, options);
    }
    const client = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000, middleware: recorder, batch: false });
    try {
      const identity = { tenant: 'acme-mutable' };
      let decision = await client.allow({ policy: 'tenant', identity });
      for (let i = 0; i < 200 && decision.source !== 'slice'; i++) decision = await client.allow({ policy: 'tenant', identity });
      expect(decision.source).toBe('slice');
      identity.tenant = 'someone-else';
      await client.close();
      expect(takes.some((take) => take.giveBackOnly)).toBe(true);
      expect(takes.map((take) => take.identity['tenant'])).toEqual(takes.map(() => 'acme-mutable'));
    } finally {
      await client.close();
      await service.stop();
      await store.close();
    }
  });

  it('slices: false, a policy without slices, or a request id: every Allow asks the service', async () => {
    expect((await run('tenant', { slices: false })).allows).toBe(300);
    expect((await run('plain')).allows).toBe(300);
    expect((await run('tenant', {}, true)).allows).toBe(300);
  });
});
