import type { CallToolResult } from '@modelcontextprotocol/client';
import type { ReserveParams } from '@quota-service/client';
import { REFUSAL_META_KEY } from '@quota-service/mcp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE, type ReferenceHttp, startReferenceHttp } from './http-harness.js';

// The reference server's cap on tool calls in progress per tenant (policy
// mcp-tool-calls-in-flight: 10 for acme), with real 2.x SDK clients over
// Streamable HTTP and a real quota service. alice is the dev user of acme who may
// update tickets; each of her clients is a separate agent of the same tenant.
// A bulk_update_tickets call stays in progress while the test holds it: its
// reservation's answer reaches the server only when the test lets it through.

/** Reservations whose answers wait until the test lets them through, one by one or all. */
function heldReservations() {
  const waiting: (() => void)[] = [];
  const arrivals: (() => void)[] = [];
  let holding = true;
  return {
    async pass(): Promise<void> {
      if (!holding) return;
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        for (const arrived of arrivals.splice(0)) arrived();
      });
    },
    /** Resolves once `n` reservations wait. */
    async waitingFor(n: number): Promise<void> {
      while (waiting.length < n) await new Promise<void>((resolve) => arrivals.push(resolve));
    },
    letOneThrough(): void {
      waiting.shift()?.();
    },
    letAllThrough(): void {
      holding = false;
      for (const resolve of waiting.splice(0)) resolve();
    },
  };
}

const held = heldReservations();
let server: ReferenceHttp;

beforeAll(async () => {
  server = await startReferenceHttp({
    wrapQuota: (quota) => ({
      allow: quota.allow,
      acquire: quota.acquire,
      reserve: async (params: ReserveParams) => {
        const reservation = await quota.reserve(params);
        await held.pass();
        return reservation;
      },
    }),
  });
});
afterAll(async () => {
  held.letAllThrough();
  await server?.close();
});

const leasesHeld = async () =>
  (await server.quotaService.client.getQuota({ policy: 'mcp-tool-calls-in-flight', identity: { tenant: 'acme' } })).limits[0]!.leasesHeld;
const bulk = (id: string) => ({ name: 'bulk_update_tickets', arguments: { ticketIds: [id], status: 'pending' as const } });

describe('reference MCP server: tool calls in flight per tenant', () => {
  it('the 11th call of a tenant while 10 run is refused with too_many_in_flight, and a call that ends frees its place', async () => {
    const agents = await Promise.all([server.connect(ALICE), server.connect(ALICE)]);
    const [first, other] = agents;
    const running = Array.from({ length: 10 }, () => first!.callTool(bulk('T-1')) as Promise<CallToolResult>);
    await held.waitingFor(10);
    expect(await leasesHeld()).toBe(10);

    // Another agent of the same tenant: the tenant's cap is full, the tool does not run.
    const refused = (await other!.callTool(bulk('T-1'))) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(refused.content[0]).toEqual({
      type: 'text',
      text: expect.stringMatching(
        /^Too many tool calls in progress for this caller \(policy mcp-tool-calls-in-flight\); tool bulk_update_tickets was not executed\. Retry after \d+ s, when a call has finished\.$/,
      ),
    });
    expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({
      reason: 'too_many_in_flight',
      retryable: true,
      policy: 'mcp-tool-calls-in-flight',
      limit: 'tenant-tool-calls-in-flight',
    });
    expect((await server.audit()).at(-1)).toMatchObject({
      tool: 'bulk_update_tickets',
      principal: { subject: 'alice', tenant: 'acme' },
      steps: { concurrency: { outcome: 'denied', policy: 'mcp-tool-calls-in-flight' } },
    });
    expect(await leasesHeld()).toBe(10);

    // One call ends: its lease is released before its result returns, and the other agent's next call fits.
    held.letOneThrough();
    const ended = await Promise.race(running);
    expect(ended.isError).toBeFalsy();
    expect(await leasesHeld()).toBe(9);
    const admitted = other!.callTool(bulk('T-1')) as Promise<CallToolResult>;
    await held.waitingFor(10);
    expect(await leasesHeld()).toBe(10);

    held.letAllThrough();
    const results = await Promise.all([...running, admitted]);
    expect(results.map((r) => r.isError ?? false)).toEqual(new Array(11).fill(false));
    // It ran (the help desk has no ticket T-1).
    expect((await admitted).structuredContent).toEqual({ updated: [], missing: ['T-1'] });
    expect(await leasesHeld()).toBe(0);
  });
});
