import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { z } from 'zod';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { parsePolicies, VirtualClock } from '@quota-service/core';
import { REFUSAL_META_KEY, type Principal, type ToolResult } from '@quota-service/mcp';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';
import { alice, type GuardedTool, type Harness } from './guard-harness.js';
import { sdkLines } from './sdk-lines.js';

// Tools whose cost is known only from their result (reserve the estimate, settle the
// actual), and a cap on calls in flight per tenant (a lease per call), through a real
// SDK client of each line and a real quota service on a frozen virtual clock.
const POLICIES = parsePolicies(
  stringify({
    policies: {
      bulk: { limits: [{ name: 'bulk', key_by: 'user', algorithm: 'token_bucket', capacity: 50, refill_per_second: 1 }] },
      'calls-in-flight': {
        failure_mode: 'fail_closed',
        limits: [{ name: 'tenant-calls-in-flight', key_by: 'tenant', algorithm: 'concurrency', limit: 2, lease_ttl_ms: 30_000 }],
      },
    },
  }),
  'metered tools test policies',
);

/** The updated count a tool reports under _meta. */
const reported = (result: ToolResult) => (result._meta as { updated?: number } | undefined)?.updated;

/** A gate the in-flight tool's calls wait at; each arrival is counted, and a cancelled call stops waiting. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const state = { arrived: 0, cancelled: 0 };
  return {
    state,
    open,
    async pass(signal: AbortSignal | undefined) {
      state.arrived++;
      await new Promise<void>((resolve, reject) => {
        void opened.then(resolve);
        signal?.addEventListener('abort', () => {
          state.cancelled++;
          reject(new Error('cancelled by the client'));
        });
      });
    },
  };
}

function meteredTools(runs: Record<string, number>, slow: ReturnType<typeof gate>): GuardedTool[] {
  const ran = (tool: string) => (runs[tool] = (runs[tool] ?? 0) + 1);
  return [
    {
      name: 'bulk_touch',
      description: 'Touches tickets; only ids starting with T- exist. "boom" throws; "half" fails after the first half.',
      input: { ids: z.array(z.string()).min(1) },
      policy: { quota: { policy: 'bulk', estimate: ({ ids }: { ids: string[] }) => ids.length, actual: reported } },
      async body({ ids }: { ids: string[] }) {
        ran('bulk_touch');
        if (ids.includes('boom')) throw new Error('the ticket store failed');
        const known = ids.filter((id) => id.startsWith('T-'));
        if (ids.includes('half')) {
          const done = Math.floor(known.length / 2);
          return { content: [{ type: 'text', text: `failed after ${done}` }], isError: true, _meta: { updated: done } };
        }
        return { content: [{ type: 'text', text: `updated ${known.length}` }], _meta: { updated: known.length } };
      },
    },
    {
      name: 'slow_job',
      description: 'Holds a place in the in-flight cap until the test opens the gate',
      input: { n: z.number() },
      policy: { concurrency: { policy: 'calls-in-flight' } },
      // biome-ignore lint/suspicious/noExplicitAny: the SDK's extra (1.x: extra.signal) or ctx (2.x: ctx.mcpReq.signal)
      async body(_args: { n: number }, extra?: any) {
        ran('slow_job');
        await slow.pass(extra?.signal ?? extra?.mcpReq?.signal);
        return { content: [{ type: 'text', text: 'done' }] };
      },
    },
  ];
}

describe.each(sdkLines)('$name', (line) => {
  let service: TestService;
  let quota: QuotaClient;
  let harness: Harness | undefined;
  const runs: Record<string, number> = {};
  let slow = gate();
  beforeAll(async () => {
    service = await startTestService(new MemoryStore(new VirtualClock(T0)), POLICIES);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await quota?.close();
    await service?.stop();
  });
  afterEach(async () => {
    slow.open();
    await harness?.close();
    harness = undefined;
    slow = gate();
    for (const key of Object.keys(runs)) delete runs[key];
  });
  const start = async (principal: Principal) => {
    harness = await line.start({ quota, principal, extraTools: meteredTools(runs, slow) });
    return harness;
  };
  const bulkLeft = async (user: string) => (await service.client.getQuota({ policy: 'bulk', identity: { user } })).limits[0]?.remaining;
  const inFlight = async (tenant: string) => (await service.client.getQuota({ policy: 'calls-in-flight', identity: { tenant } })).limits[0]?.leasesHeld;
  const principal = (subject: string, tenant = subject): Principal => ({ ...alice, subject, tenant });

  describe('reserve the estimate, settle the actual', () => {
    it('50 unknown ids cost nothing once settled; the audit line has estimate, actual and the settled difference', async () => {
      const h = await start(principal('m-unknown'));
      const ids = Array.from({ length: 50 }, (_, i) => `X-${i}`);
      const result = await h.callTool('bulk_touch', { ids });
      expect(result.isError).toBeFalsy();
      expect(await bulkLeft('m-unknown')).toBe(50);
      // The next call is not told to wait: the whole bucket is there.
      expect((await h.callTool('bulk_touch', { ids: ['T-1', 'T-2', 'X-1'] })).isError).toBeFalsy();
      expect(await bulkLeft('m-unknown')).toBe(48);

      const records = await h.auditRecords();
      expect(records.map((r) => r.steps.quota)).toEqual([
        { outcome: 'allowed', policy: 'bulk', cost: 50, estimate: 50, actual: 0, delta: -50, settlement: 'settled', source: 'store' },
        { outcome: 'allowed', policy: 'bulk', cost: 3, estimate: 3, actual: 2, delta: -1, settlement: 'settled', source: 'store' },
      ]);
      expect(records.map((r) => r.result)).toEqual(['ok', 'ok']);
    });

    it('a tool error settles what the tool reports; a body that throws settles 0', async () => {
      const h = await start(principal('m-errors'));
      const partial = await h.callTool('bulk_touch', { ids: ['T-1', 'T-2', 'T-3', 'T-4', 'half'] });
      expect(partial.isError).toBe(true);
      expect(await bulkLeft('m-errors')).toBe(48);
      const thrown = await h.callTool('bulk_touch', { ids: ['T-1', 'boom'] });
      expect(thrown.isError).toBe(true);
      expect(await bulkLeft('m-errors')).toBe(48);
      const records = await h.auditRecords();
      expect(records.map((r) => [r.result, r.steps.quota.estimate, r.steps.quota.actual, r.steps.quota.delta, r.steps.quota.settlement])).toEqual([
        ['tool_error', 5, 2, -3, 'settled'],
        ['exception', 2, 0, -2, 'settled'],
      ]);
    });

    it('an estimate over what is left is refused as rate_limited: the body does not run, nothing to settle', async () => {
      const h = await start(principal('m-over'));
      await h.callTool('bulk_touch', { ids: Array.from({ length: 40 }, (_, i) => `T-${i}`) });
      const refused = await h.callTool('bulk_touch', { ids: Array.from({ length: 20 }, (_, i) => `T-${i}`) });
      expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'rate_limited', policy: 'bulk' });
      expect(runs['bulk_touch']).toBe(1);
      const last = (await h.auditRecords()).at(-1);
      expect(last?.steps.quota).toMatchObject({ outcome: 'denied', estimate: 20 });
      expect(last?.steps.quota.settlement).toBeUndefined();
    });
  });

  describe('calls in flight per tenant', () => {
    it('two calls of one tenant run, the third is refused as too_many_in_flight without running; finished calls free their places', async () => {
      const h = await start(principal('m-cap', 'tenant-cap'));
      const held = [h.callTool('slow_job', { n: 1 }), h.callTool('slow_job', { n: 2 })];
      await vi.waitFor(() => expect(slow.state.arrived).toBe(2));
      expect(await inFlight('tenant-cap')).toBe(2);

      const refused = await h.callTool('slow_job', { n: 3 });
      expect(refused.isError).toBe(true);
      expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({
        reason: 'too_many_in_flight',
        retryable: true,
        policy: 'calls-in-flight',
        limit: 'tenant-calls-in-flight',
      });
      expect(runs['slow_job']).toBe(2);

      slow.open();
      expect((await Promise.all(held)).map((r) => r.isError ?? false)).toEqual([false, false]);
      expect(await inFlight('tenant-cap')).toBe(0);
      expect((await h.callTool('slow_job', { n: 4 })).isError).toBeFalsy();

      const records = await h.auditRecords();
      const byResult = (result: string) => records.filter((r) => r.result === result).map((r) => r.steps.concurrency);
      expect(byResult('refused')).toEqual([
        { outcome: 'denied', policy: 'calls-in-flight', source: 'store', deniedBy: 'tenant-calls-in-flight', retryAfterMs: expect.any(Number) },
      ]);
      expect(byResult('ok')).toEqual(Array(3).fill({ outcome: 'acquired', policy: 'calls-in-flight', source: 'store', release: 'released' }));
    });

    it('a finished call releases its place; another tenant counts apart', async () => {
      const h = await start(principal('m-fail', 'tenant-fail'));
      const call = h.callTool('slow_job', { n: 1 });
      await vi.waitFor(() => expect(slow.state.arrived).toBe(1));
      expect(await inFlight('tenant-fail')).toBe(1);
      // Another tenant is not affected by tenant-fail's calls.
      expect(await inFlight('tenant-other')).toBe(0);
      slow.open();
      await call;
      expect(await inFlight('tenant-fail')).toBe(0);
    });
  });
});

// Cancellation reaches the tool body on the transports that carry notifications/cancelled to the server handling the call.
describe.each(sdkLines.slice(0, 2))('$name: a cancelled call', (line) => {
  let service: TestService;
  let quota: QuotaClient;
  beforeAll(async () => {
    service = await startTestService(new MemoryStore(new VirtualClock(T0)), POLICIES);
    quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}`, deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await quota?.close();
    await service?.stop();
  });

  it('releases its place in the cap when the client cancels it', async () => {
    const slow = gate();
    const h = await line.start({ quota, principal: { ...alice, subject: 'm-cancel', tenant: 'tenant-cancel' }, extraTools: meteredTools({}, slow) });
    try {
      const abort = new AbortController();
      const call = h.callTool('slow_job', { n: 1 }, { signal: abort.signal }).catch((error: unknown) => error);
      await vi.waitFor(() => expect(slow.state.arrived).toBe(1));
      expect((await service.client.getQuota({ policy: 'calls-in-flight', identity: { tenant: 'tenant-cancel' } })).limits[0]?.leasesHeld).toBe(1);
      abort.abort();
      expect(await call).toBeInstanceOf(Error);
      await vi.waitFor(() => expect(slow.state.cancelled).toBe(1));
      await vi.waitFor(async () =>
        expect((await service.client.getQuota({ policy: 'calls-in-flight', identity: { tenant: 'tenant-cancel' } })).limits[0]?.leasesHeld).toBe(0),
      );
      // The record is written once the lease is released: the client is gone, nothing awaits it.
      await vi.waitFor(async () =>
        expect((await h.auditRecords()).at(-1)).toMatchObject({ result: 'exception', steps: { concurrency: { outcome: 'acquired', release: 'released' } } }),
      );
    } finally {
      slow.open();
      await h.close();
    }
  });
});
