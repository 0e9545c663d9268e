import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { VirtualClock } from '@quota-service/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ALICE, BOB, initialize, startReferenceHttp, type ReferenceHttp } from './http-harness.js';

// Session limits on virtual time: the server reads the clock the test moves, so
// idle expiry happens exactly when the test says, never by waiting.

const IDLE_MS = 15 * 60_000;
const CAP = 3;

let clock: VirtualClock;
let server: ReferenceHttp;
beforeEach(async () => {
  clock = new VirtualClock(Date.UTC(2026, 0, 1));
  server = await startReferenceHttp({ transport: { now: () => clock.now(), sessionIdleTimeoutMs: IDLE_MS, maxSessionsPerPrincipal: CAP } });
});
afterEach(async () => {
  await server?.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const sessionNotFound = { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null };
const tooMany = (seconds: number) => ({
  jsonrpc: '2.0',
  error: {
    code: -32000,
    message: `Too many open sessions for this principal (limit ${CAP}): close one (HTTP DELETE with its Mcp-Session-Id) or retry after ${seconds} s`,
  },
  id: null,
});

describe('open sessions per principal', () => {
  it('past the cap a principal gets 429 with Retry-After until a session is closed; other principals are not affected', async () => {
    const alice = [];
    for (let i = 0; i < CAP; i++) alice.push(await server.connect(ALICE));

    const refused = await server.raw('POST', bearer(ALICE), initialize);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('900');
    expect(JSON.parse(refused.body)).toEqual(tooMany(900));
    await expect(server.connect(ALICE)).rejects.toMatchObject({ code: 429 });

    // Retry-After is when the first of them expires if left idle.
    clock.advance(5 * 60_000);
    const later = await server.raw('POST', bearer(ALICE), initialize);
    expect(later.headers['retry-after']).toBe('600');
    expect(JSON.parse(later.body)).toEqual(tooMany(600));

    // Another principal has its own allowance.
    const { client: bobClient } = await server.connect(BOB);
    expect((await bobClient.listTools()).tools.length).toBeGreaterThan(0);

    // Closing a session (DELETE) frees its slot.
    await alice[0]!.transport.terminateSession();
    const { client } = await server.connect(ALICE);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
  });

  it('initializes that run at the same time never open more than the cap', async () => {
    // A server of its own whose token check holds every request until all have arrived,
    // so all of them reach the session limit before any session exists.
    const attempts = CAP + 5;
    let release!: () => void;
    const allArrived = new Promise<void>((resolve) => (release = resolve));
    let arrived = 0;
    const gated = await startReferenceHttp({
      transport: { now: () => clock.now(), sessionIdleTimeoutMs: IDLE_MS, maxSessionsPerPrincipal: CAP },
      verifier: (inner) => ({
        async verifyAccessToken(token) {
          if (++arrived === attempts) release();
          await allArrived;
          return inner.verifyAccessToken(token);
        },
      }),
    });
    try {
      const answers = await Promise.all(Array.from({ length: attempts }, () => gated.raw('POST', bearer(BOB), initialize)));
      expect(answers.map((a) => a.status).sort()).toEqual([...Array(CAP).fill(200), ...Array(attempts - CAP).fill(429)]);
    } finally {
      await gated.close();
    }
  });
});

describe('idle expiry', () => {
  it('an idle session is closed, and a later request with its id gets 404 Session not found', async () => {
    const { client, transport } = await server.connect(ALICE);
    const sessionId = transport.sessionId!;
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);

    clock.advance(IDLE_MS);
    await expect(client.listTools()).rejects.toMatchObject({ code: 404 });
    const raw = await server.raw(
      'POST',
      { ...bearer(ALICE), 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
      { jsonrpc: '2.0', id: 9, method: 'tools/list' },
    );
    expect(raw.status).toBe(404);
    expect(JSON.parse(raw.body)).toEqual(sessionNotFound);
    expect(server.closedSessions()).toBe(1);
    // The expired session no longer counts against the cap.
    for (let i = 0; i < CAP; i++) await server.connect(ALICE);
  });

  it('requests keep a session alive, and a call still running (waiting for approval) never expires', async () => {
    const { client } = await server.connect(ALICE, { elicit: true });
    for (let i = 0; i < 3; i++) {
      clock.advance(IDLE_MS - 1);
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    }
    // The human takes twice the idle timeout to answer; the call's own request keeps the session.
    client.setRequestHandler(ElicitRequestSchema, async () => {
      clock.advance(2 * IDLE_MS);
      return { action: 'accept', content: { approve: true } };
    });
    const deleted = (await client.callTool({ name: 'delete_customer', arguments: { customerId: 'c-100' } })) as CallToolResult;
    expect(deleted.content[0]).toEqual({ type: 'text', text: 'Deleted customer c-100.' });
    expect(server.closedSessions()).toBe(0);
    // Idle counts from the end of that call.
    clock.advance(IDLE_MS - 1);
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    clock.advance(IDLE_MS);
    await expect(client.listTools()).rejects.toMatchObject({ code: 404 });
  });

  it('an expired session is closed even if its client never comes back', async () => {
    const opened = await server.raw('POST', bearer(ALICE), initialize);
    expect(opened.status).toBe(200);
    clock.advance(IDLE_MS);
    // Opening any session sweeps the expired ones (a timer does too, on real time).
    expect((await server.raw('POST', bearer(BOB), initialize)).status).toBe(200);
    expect(server.closedSessions()).toBe(1);
  });
});
