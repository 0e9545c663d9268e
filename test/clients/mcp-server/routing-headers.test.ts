import { type CallToolResult, Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { AuditRecord } from '@quota-service/mcp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE, type RawResponse, type ReferenceHttp, REVISION, startReferenceHttp, toolsCall } from './http-harness.js';

// A gateway in front of the reference server limits tools/call per tool from the
// Mcp-Method and Mcp-Name headers (docs/envoy.md). That limit holds only if no tool
// runs unless those headers name it. The SDK checks them on 2026-07-28 requests
// only; these tests send what a client claiming an older revision (or none) can
// send, through raw HTTP and a real 2.x SDK client on each 2025-era revision,
// against the real reference server, its development issuer and a real quota service.

/** The protocol revisions before 2026-07-28 (none of them defines the headers), and no version header at all. */
const OLDER_REVISIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', undefined] as const;

/** A tools/call as a 2025-era client sends it: no per-request envelope, the version (if any) in its header only. */
function legacyCall(id: number, name: string, args: Record<string, unknown>, revision: string | undefined, headers: Record<string, string> = {}) {
  return {
    headers: { ...(revision === undefined ? {} : { 'mcp-protocol-version': revision }), ...headers },
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } },
  };
}

const errorOf = (response: RawResponse) => JSON.parse(response.body) as { id: unknown; error: { code: number; message: string } };

/** The JSON-RPC result of a served call, whether it came as JSON or as one SSE event. */
function resultOf(response: RawResponse): CallToolResult {
  const text = response.body.startsWith('event:')
    ? response.body
        .split('\n')
        .find((line) => line.startsWith('data: '))!
        .slice(6)
    : response.body;
  return (JSON.parse(text) as { result: CallToolResult }).result;
}

const refusedRecord = (tool: string, requestId: number, reason: RegExp) =>
  expect.objectContaining({
    tool,
    requestId,
    principal: { subject: 'alice', tenant: 'acme', clientId: 'alice-cli' },
    arguments: { title: '[redacted]' },
    steps: { validation: 'not_checked', authentication: 'passed', permission: 'not_checked', approval: 'not_checked', quota: { outcome: 'not_checked' } },
    result: 'refused',
    reason: expect.stringMatching(reason),
  });

/** A 2.x SDK client on one 2025-era revision (the `initialize` handshake), with alice's credentials. */
async function legacyClient(server: ReferenceHttp, revision: string): Promise<Client> {
  const authProvider = new ClientCredentialsProvider({ clientId: ALICE.id, clientSecret: ALICE.secret, expectedIssuer: server.issuer.issuer });
  const client = new Client({ name: 'legacy-client', version: '1.0.0' }, { supportedProtocolVersions: [revision], versionNegotiation: { mode: 'legacy' } });
  await client.connect(new StreamableHTTPClientTransport(server.resource, { authProvider }));
  return client;
}

describe('routing headers required (the default): every tools/call is named by its headers, whatever revision it claims', () => {
  let server: ReferenceHttp;
  let bearer: Record<string, string>;
  beforeAll(async () => {
    server = await startReferenceHttp();
    bearer = { authorization: `Bearer ${await server.token(ALICE)}` };
  });
  afterAll(async () => {
    await server?.close();
  });

  it('a tools/call of an older revision (or none) without Mcp-Method and Mcp-Name: 400 HeaderMismatch, nothing runs, each refusal audited', async () => {
    let id = 100;
    for (const revision of OLDER_REVISIONS) {
      const bare = legacyCall(++id, 'create_ticket', { title: 'no headers' }, revision);
      const bareResponse = await server.raw('POST', { ...bare.headers, ...bearer }, bare.body);
      expect(bareResponse.status).toBe(400);
      expect(errorOf(bareResponse)).toEqual({
        jsonrpc: '2.0',
        id,
        error: {
          code: -32020,
          message: 'Bad Request: the request headers and body disagree: the body calls a tool but the required Mcp-Method header is absent',
        },
      });
      // The method alone is not enough: a gateway keyed on the tool's name would not count it.
      const noName = legacyCall(++id, 'create_ticket', { title: 'no name' }, revision, { 'mcp-method': 'tools/call' });
      const noNameResponse = await server.raw('POST', { ...noName.headers, ...bearer }, noName.body);
      expect(noNameResponse.status).toBe(400);
      expect(errorOf(noNameResponse).error).toEqual({
        code: -32020,
        message: 'Bad Request: the request headers and body disagree: the body calls tool "create_ticket" but the required Mcp-Name header is absent',
      });
    }
    const records = (await server.audit()).filter((record) => Number(record.requestId) > 100 && Number(record.requestId) <= id);
    expect(records).toHaveLength(10);
    expect(records[0]).toEqual(refusedRecord('create_ticket', 101, /^the request headers and body disagree: .*Mcp-Method header is absent: answered 400$/));
    expect(records[1]).toEqual(refusedRecord('create_ticket', 102, /Mcp-Name header is absent: answered 400$/));

    // Nothing ran and no quota was spent: the first call that is named gets the first ticket.
    const named = legacyCall(++id, 'create_ticket', { title: 'named' }, '2025-06-18', { 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket' });
    const served = await server.raw('POST', { ...named.headers, ...bearer }, named.body);
    expect(served.status).toBe(200);
    expect(resultOf(served).content).toEqual([{ type: 'text', text: 'Created ticket T-1.' }]);
  });

  it('a header naming another tool than the body, on every revision (2026-07-28 too): 400 HeaderMismatch, nothing runs', async () => {
    let id = 200;
    const mismatch =
      /^Bad Request: the request headers and body disagree: the body carries params\.name="bulk_update_tickets" but the Mcp-Name header is "create_ticket" \(it must be "bulk_update_tickets"\)$/;
    const args = { ticketIds: ['T-1'], status: 'closed' };
    for (const revision of OLDER_REVISIONS) {
      const call = legacyCall(++id, 'bulk_update_tickets', args, revision, { 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket' });
      const response = await server.raw('POST', { ...call.headers, ...bearer }, call.body);
      expect(response.status).toBe(400);
      expect(errorOf(response)).toMatchObject({ id, error: { code: -32020, message: expect.stringMatching(mismatch) } });
    }
    const modern = toolsCall(++id, 'bulk_update_tickets', args, { 'mcp-name': 'create_ticket' });
    const modernResponse = await server.raw('POST', { ...modern.headers, ...bearer }, modern.body);
    expect(modernResponse.status).toBe(400);
    expect(errorOf(modernResponse)).toMatchObject({ id, error: { code: -32020, message: expect.stringMatching(mismatch) } });

    // The same name written another way is another name to a gateway that compares header text:
    // create_ticket in base64, and the header given twice.
    const encoded = toolsCall(++id, 'create_ticket', { title: 'x' }, { 'mcp-name': `=?base64?${Buffer.from('create_ticket').toString('base64')}?=` });
    const encodedResponse = await server.raw('POST', { ...encoded.headers, ...bearer }, encoded.body);
    expect(encodedResponse.status).toBe(400);
    expect(errorOf(encodedResponse).error.message).toMatch(/but the Mcp-Name header is "=\?base64\?Y3JlYXRlX3RpY2tldA==\?=" \(it must be "create_ticket"\)$/);
    const twice = legacyCall(++id, 'create_ticket', { title: 'x' }, '2025-06-18', { 'mcp-method': 'tools/call' });
    const twiceResponse = await server.raw('POST', { ...twice.headers, 'mcp-name': ['create_ticket', 'create_ticket'], ...bearer }, twice.body);
    expect(twiceResponse.status).toBe(400);
    expect(errorOf(twiceResponse).error).toEqual({
      code: -32020,
      message: 'Bad Request: the request headers and body disagree: the Mcp-Name header is given more than once',
    });

    const records = (await server.audit()).filter((record) => Number(record.requestId) > 200 && Number(record.requestId) <= id);
    expect(records.map((record) => record.result)).toEqual(Array(id - 200).fill('refused'));
    // Nothing was updated: T-1 is still open (the first test created it).
    const client = await server.connect(ALICE);
    const update = (await client.callTool({ name: 'bulk_update_tickets', arguments: { ticketIds: ['T-1'], status: 'pending' } })) as CallToolResult;
    expect(update.structuredContent).toEqual({ updated: ['T-1'], missing: [] });
  });

  it('a 2025-03-26 JSON-RPC batch of three tools/call under one set of headers: 400, none of them runs, each audited', async () => {
    const calls = [301, 302, 303].map((id) => legacyCall(id, 'create_ticket', { title: `batched ${id}` }, '2025-03-26').body);
    const batch = await server.raw('POST', { 'mcp-protocol-version': '2025-03-26', 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket', ...bearer }, calls);
    expect(batch.status).toBe(400);
    expect(errorOf(batch)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32600,
        message: 'Bad Request: JSON-RPC batches are not accepted: send each message in a request of its own, named by its Mcp-Method and Mcp-Name headers',
      },
    });
    // Without headers, and a batch of one: refused all the same.
    const bare = await server.raw('POST', { 'mcp-protocol-version': '2025-03-26', ...bearer }, calls.slice(0, 1));
    expect(bare.status).toBe(400);
    expect(errorOf(bare).error.code).toBe(-32600);

    const records = (await server.audit()).filter((record) => Number(record.requestId) > 300 && Number(record.requestId) < 400);
    expect(records).toEqual([
      refusedRecord('create_ticket', 301, /^JSON-RPC batches are not accepted/),
      refusedRecord('create_ticket', 302, /^JSON-RPC batches are not accepted/),
      refusedRecord('create_ticket', 303, /^JSON-RPC batches are not accepted/),
      refusedRecord('create_ticket', 301, /^JSON-RPC batches are not accepted/),
    ]);
    // None ran: the next ticket is T-2 (T-1 came from the first test).
    const client = await server.connect(ALICE);
    const created = (await client.callTool({ name: 'create_ticket', arguments: { title: 'after the batch' } })) as CallToolResult;
    expect(created.structuredContent).toEqual({ id: 'T-2', status: 'open' });
  });

  it('a real 2.x client on each 2025-era revision connects and lists tools, but its tool calls (which carry no such headers) are refused', async () => {
    for (const revision of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
      const client = await legacyClient(server, revision);
      try {
        expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('create_ticket');
        await expect(client.callTool({ name: 'create_ticket', arguments: { title: revision } })).rejects.toThrow(/Mcp-Method header is absent/);
      } finally {
        await client.close();
      }
    }
    // One refusal per client, audited like the raw ones (the client numbers its requests from 0).
    const audited = (await server.audit()).filter((record) => Number(record.requestId) < 100 && record.result === 'refused');
    expect(audited.map((record) => record.reason)).toEqual(
      Array(4).fill('the request headers and body disagree: the body calls a tool but the required Mcp-Method header is absent: answered 400'),
    );
    // A 2026-07-28 client names every call: served.
    const modern = await server.connect(ALICE);
    const created = (await modern.callTool({ name: 'create_ticket', arguments: { title: 'modern' } })) as CallToolResult;
    expect(created.structuredContent).toEqual({ id: 'T-3', status: 'open' });
  });

  it('an SDK 1.x client (as the MCP Inspector is): refused without the headers; with static headers naming its one tool, that tool is served, no other', async () => {
    const v1 = async (headers: Record<string, string>) => {
      const client = new V1Client({ name: 'v1-client', version: '1.0.0' });
      await client.connect(new V1StreamableHTTPClientTransport(server.resource, { requestInit: { headers: { ...bearer, ...headers } } }));
      return client;
    };
    const plain = await v1({});
    try {
      expect((await plain.listTools()).tools.map((tool) => tool.name)).toContain('create_ticket');
      await expect(plain.callTool({ name: 'create_ticket', arguments: { title: 'v1' } })).rejects.toThrow(/"code":-32020,.*Mcp-Method header is absent/);
    } finally {
      await plain.close();
    }
    // Every request of its session carries the headers (initialize and tools/list too): only the tool call is checked against them.
    const named = await v1({ 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket' });
    try {
      expect((await named.listTools()).tools.map((tool) => tool.name)).toContain('create_ticket');
      const created = (await named.callTool({ name: 'create_ticket', arguments: { title: 'v1 named' } })) as CallToolResult;
      expect(created.structuredContent).toEqual({ id: 'T-4', status: 'open' });
      await expect(named.callTool({ name: 'bulk_update_tickets', arguments: { ticketIds: ['T-4'], status: 'closed' } })).rejects.toThrow(
        /"code":-32020,.*the Mcp-Name header is \\"create_ticket\\"/,
      );
    } finally {
      await named.close();
    }
  });
});

describe('routing headers optional: 2025-era requests may leave them out, but never contradict the body', () => {
  let server: ReferenceHttp;
  let bearer: Record<string, string>;
  beforeAll(async () => {
    server = await startReferenceHttp({ transport: { routingHeaders: 'optional' } });
    bearer = { authorization: `Bearer ${await server.token(ALICE)}` };
  });
  afterAll(async () => {
    await server?.close();
  });

  it('a 2025-era call without headers is served; one whose header names another tool, or a batch under headers, is refused', async () => {
    const client = await legacyClient(server, '2025-06-18');
    try {
      const created = (await client.callTool({ name: 'create_ticket', arguments: { title: 'legacy' } })) as CallToolResult;
      expect(created.structuredContent).toEqual({ id: 'T-1', status: 'open' });
    } finally {
      await client.close();
    }
    const disguised = legacyCall(11, 'create_ticket', { title: 'x' }, '2025-06-18', { 'mcp-method': 'tools/call', 'mcp-name': 'search' });
    const refused = await server.raw('POST', { ...disguised.headers, ...bearer }, disguised.body);
    expect(refused.status).toBe(400);
    expect(errorOf(refused)).toMatchObject({ id: 11, error: { code: -32020, message: expect.stringContaining('but the Mcp-Name header is "search"') } });

    const calls = [12, 13].map((id) => legacyCall(id, 'create_ticket', { title: 'batched' }, '2025-03-26').body);
    const underHeaders = await server.raw(
      'POST',
      { 'mcp-protocol-version': '2025-03-26', 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket', ...bearer },
      calls,
    );
    expect(underHeaders.status).toBe(400);
    expect(errorOf(underHeaders).error).toEqual({
      code: -32600,
      message: 'Bad Request: a JSON-RPC batch cannot carry Mcp-Method or Mcp-Name: one set of headers cannot name several messages',
    });
    // 2026-07-28 requests still need both headers (the SDK's own rule).
    const modern = toolsCall(14, 'create_ticket', { title: 'x' });
    delete (modern.headers as Record<string, string>)['mcp-name'];
    expect((await server.raw('POST', { ...modern.headers, ...bearer }, modern.body)).status).toBe(400);
    expect((await server.audit()).filter((record: AuditRecord) => record.result === 'refused').map((record) => record.requestId)).toEqual([11, 12, 13, 14]);
    // Nothing else ran: the next ticket is T-2.
    const named = toolsCall(15, 'create_ticket', { title: 'x' });
    expect(resultOf(await server.raw('POST', { ...named.headers, ...bearer }, named.body)).structuredContent).toEqual({ id: 'T-2', status: 'open' });
    expect(REVISION).toBe('2026-07-28');
  });
});
