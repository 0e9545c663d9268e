import type { CallToolResult } from '@modelcontextprotocol/client';
import { pino } from 'pino';
import { REFUSAL_META_KEY } from '@quota-service/mcp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevClients } from '../../../clients/mcp-server/dev-issuer/dev-clients.js';
import { startDevIssuer } from '../../../clients/mcp-server/dev-issuer/dev-issuer.js';
import { ALICE, BOB, startReferenceHttp, toolsCall, type ReferenceHttp } from './http-harness.js';

// The reference server on the 2026-07-28 revision over real Streamable HTTP: a real
// development authorization server issues the tokens, a real 2.x SDK client finds it
// through the server's 401 and protected resource metadata, a real quota service
// decides. The issuer's clock is ours, so a token can be issued already expired.

let server: ReferenceHttp;
let issuerSkewMs = 0;
const logLines: string[] = [];
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

beforeAll(async () => {
  server = await startReferenceHttp({
    logger: pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) }),
    issuerNow: () => Date.now() + issuerSkewMs,
  });
});
afterAll(async () => {
  await server?.close();
});

describe('reference MCP server on 2026-07-28 over Streamable HTTP', () => {
  it('a client with credentials finds the authorization server from the 401, gets a token for this resource and calls tools', async () => {
    const client = await server.connect(ALICE);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['bulk_update_tickets', 'create_ticket', 'delete_customer']);
    const created = (await client.callTool({ name: 'create_ticket', arguments: { title: 'printer on fire' } })) as CallToolResult;
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ status: 'open' });

    const templates = await client.listResourceTemplates();
    expect(templates.resourceTemplates.map((t) => t.uriTemplate)).toEqual(['customers://{customerId}']);
    const record = await client.readResource({ uri: 'customers://c-200' });
    expect(JSON.parse((record.contents[0] as { text: string }).text)).toMatchObject({ id: 'c-200', name: 'Globex' });
    const prompt = await client.getPrompt({ name: 'incident_review', arguments: { incidentId: 'INC-9', severity: 'sev2' } });
    expect((prompt.messages[0]?.content as { text: string }).text).toMatch(/^Write a blameless review of incident INC-9 \(sev2\)\./);

    // The principal is the token's subject, as the issuer put it there.
    expect((await server.audit()).at(-1)).toMatchObject({
      tool: 'create_ticket',
      principal: { subject: 'alice', tenant: 'acme', clientId: 'alice-cli' },
      result: 'ok',
    });
  });

  it('stateless: a single tools/call with no initialize before it is served, and no Mcp-Session-Id comes back', async () => {
    const call = toolsCall(7, 'bulk_update_tickets', { ticketIds: ['T-1'], status: 'pending' });
    const response = await server.raw('POST', { ...call.headers, ...bearer(await server.token(ALICE)) }, call.body);
    expect(response.status).toBe(200);
    expect(response.headers['mcp-session-id']).toBeUndefined();
    expect(JSON.parse(response.body)).toMatchObject({ id: 7, result: { content: [{ type: 'text', text: 'Updated 1 ticket(s) to pending.' }] } });
  });

  it('over quota: isError with the text and the _meta details, not a JSON-RPC error', async () => {
    const client = await server.connect(ALICE);
    // alice spent 1 of 5 in the first test (the memory store's clock is frozen).
    for (let i = 0; i < 4; i++) expect(((await client.callTool({ name: 'create_ticket', arguments: { title: 'x' } })) as CallToolResult).isError).toBeFalsy();
    const denied = (await client.callTool({ name: 'create_ticket', arguments: { title: 'x' } })) as CallToolResult;
    expect(denied.isError).toBe(true);
    expect(denied.content[0]).toEqual({
      type: 'text',
      text: 'Rate limit reached for tool create_ticket (policy mcp-create-ticket). Nothing was executed. Retry after 2 s.',
    });
    expect(denied._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'rate_limited', retryAfterMs: 2000, policy: 'mcp-create-ticket' });
  });

  it('no token: 401 whose challenge points at the protected resource metadata, which names the authorization server', async () => {
    const call = toolsCall(1, 'create_ticket', { title: 'x' });
    const response = await server.raw('POST', call.headers, call.body);
    expect(response.status).toBe(401);
    const metadataUrl = `http://localhost:${server.port}/.well-known/oauth-protected-resource/mcp`;
    expect(response.headers['www-authenticate']).toBe(
      `Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="${metadataUrl}"`,
    );
    const metadata = await fetch(`${server.base}/.well-known/oauth-protected-resource/mcp`);
    expect(metadata.status).toBe(200);
    expect(await metadata.json()).toEqual({
      resource: server.resource.href,
      authorization_servers: [server.issuer.issuer],
      scopes_supported: ['tickets:read', 'tickets:write', 'customers:read'],
      resource_name: 'Quota-guarded help desk (reference MCP server)',
    });
    const issuerMetadata = (await (await fetch(`${server.issuer.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(issuerMetadata).toMatchObject({
      issuer: server.issuer.issuer,
      token_endpoint: `${server.issuer.issuer}/token`,
      grant_types_supported: ['client_credentials'],
    });
  });

  it('a token for another resource (audience), an expired one, another issuer’s and a forged one: 401 invalid_token', async () => {
    const call = toolsCall(2, 'create_ticket', { title: 'x' });
    const expectRefused = async (token: string, description: string) => {
      const response = await server.raw('POST', { ...call.headers, ...bearer(token) }, call.body);
      expect(response.status).toBe(401);
      expect(JSON.parse(response.body)).toEqual({ error: 'invalid_token', error_description: description });
      expect(response.headers['www-authenticate']).toContain('resource_metadata="http://localhost:');
    };
    await expectRefused(await server.token(ALICE, { resource: 'https://other-server.example/mcp' }), 'Token was not issued for this resource');
    issuerSkewMs = -2 * 3600_000;
    const expired = await server.token(ALICE);
    issuerSkewMs = 0;
    await expectRefused(expired, 'Token has expired');

    // Same claims, another key: a second development issuer the server does not trust.
    const stranger = await startDevIssuer({
      host: '127.0.0.1',
      port: 0,
      clients: await loadDevClients('config/mcp-dev-clients.yaml'),
      logger: pino({ level: 'silent' }),
    });
    try {
      const form = new URLSearchParams({ grant_type: 'client_credentials', resource: server.resource.href });
      const basic = Buffer.from(`${ALICE.id}:${ALICE.secret}`).toString('base64');
      const response = await fetch(`${stranger.issuer}/token`, { method: 'POST', headers: { authorization: `Basic ${basic}` }, body: form });
      const { access_token } = (await response.json()) as { access_token: string };
      // Its key is not in the trusted issuer's JWKS: refused before its `iss` is even read.
      await expectRefused(access_token, 'Token signature is not valid');
    } finally {
      await stranger.close();
    }
    const good = await server.token(ALICE);
    const [header, payload] = good.split('.');
    await expectRefused(`${header}.${payload}.${'A'.repeat(86)}`, 'Token signature is not valid');
    await expectRefused('not-a-jwt', 'Invalid token');
  });

  it('a token without a tool’s scope: 403 insufficient_scope naming the scope, nothing runs, the refusal is audited', async () => {
    const before = (await server.audit()).length;
    const call = toolsCall(3, 'create_ticket', { title: 'viewer tries' });
    const response = await server.raw('POST', { ...call.headers, ...bearer(await server.token(BOB)) }, call.body);
    expect(response.status).toBe(403);
    expect(response.headers['www-authenticate']).toBe(
      `Bearer error="insufficient_scope", error_description="Insufficient scope", scope="tickets:write", resource_metadata="http://localhost:${server.port}/.well-known/oauth-protected-resource/mcp"`,
    );
    const records = await server.audit();
    expect(records.slice(before)).toEqual([
      expect.objectContaining({
        tool: 'create_ticket',
        requestId: 3,
        principal: { subject: 'bob', tenant: 'acme', clientId: 'bob-cli' },
        arguments: { title: '[redacted]' },
        steps: expect.objectContaining({ authentication: 'passed', permission: 'denied', quota: { outcome: 'not_checked' } }),
        result: 'refused',
        reason: 'missing scope tickets:write: answered 403 insufficient_scope',
      }),
    ]);
    // The scope he holds is enough for the customer resource.
    const client = await server.connect(BOB);
    expect((await client.readResource({ uri: 'customers://c-100' })).contents).toHaveLength(1);
  });

  it('Mcp-Name or Mcp-Method that disagree with the body, or are missing: 400 with -32020 (HeaderMismatch), nothing runs, the refusals are audited', async () => {
    const token = await server.token(ALICE);
    const before = (await server.audit()).length;
    // A gateway limiting create_ticket by its header would let this bulk update through, if the server did not check.
    const disguised = toolsCall(4, 'bulk_update_tickets', { ticketIds: ['T-1'], status: 'closed' }, { 'mcp-name': 'create_ticket' });
    const wrongMethod = toolsCall(5, 'create_ticket', { title: 'x' }, { 'mcp-method': 'tools/list' });
    const noName = toolsCall(6, 'create_ticket', { title: 'x' });
    delete (noName.headers as Record<string, string>)['mcp-name'];
    for (const call of [disguised, wrongMethod, noName]) {
      const response = await server.raw('POST', { ...call.headers, ...bearer(token) }, call.body);
      expect(response.status).toBe(400);
      const body = JSON.parse(response.body) as { id: unknown; error: { code: number; message: string } };
      expect(body.id).toBe(call.body.id);
      expect(body.error.code).toBe(-32020);
      expect(body.error.message).toMatch(/^Bad Request: the request headers and body disagree|Mcp-Name header is absent|Mcp-Method/);
    }
    // Refused before the guard: no step ran.
    expect((await server.audit()).slice(before)).toEqual(
      [disguised, wrongMethod, noName].map((call) =>
        expect.objectContaining({
          tool: call.body.params.name,
          requestId: call.body.id,
          steps: { validation: 'not_checked', authentication: 'passed', permission: 'not_checked', approval: 'not_checked', quota: { outcome: 'not_checked' } },
          result: 'refused',
        }),
      ),
    );
  });

  it('a call the SDK’s input validation rejects: an isError result, the tool does not run and the guard never sees it (no audit record)', async () => {
    const client = await server.connect(ALICE);
    const before = await server.audit();
    const rejected = (await client.callTool({ name: 'bulk_update_tickets', arguments: { ticketIds: [], status: 'closed' } })) as CallToolResult;
    expect(rejected.isError).toBe(true);
    expect((rejected.content[0] as { text: string }).text).toMatch(/^Input validation error: Invalid arguments for tool bulk_update_tickets/);
    expect(await server.audit()).toEqual(before);
  });

  it('a sensitive tool asks the client (input_required round) and runs when the client says yes', async () => {
    const client = await server.connect(ALICE, { elicit: true });
    const deleted = (await client.callTool({ name: 'delete_customer', arguments: { customerId: 'c-100' } })) as CallToolResult;
    expect(deleted.content[0]).toEqual({ type: 'text', text: 'Deleted customer c-100.' });
    expect((await server.audit()).at(-1)).toMatchObject({ tool: 'delete_customer', steps: { approval: 'approved' }, result: 'ok' });
  });

  it('a Host header not in the allowed list gets 403 before authentication (DNS rebinding protection)', async () => {
    const call = toolsCall(8, 'create_ticket', { title: 'x' });
    const response = await server.raw('POST', { ...call.headers, host: `evil.example:${server.port}` }, call.body);
    expect(response.status).toBe(403);
    expect(JSON.parse(response.body)).toMatchObject({ error: { message: 'Invalid Host: evil.example' } });
  });

  it('no raw token reaches the audit file or the log', async () => {
    const token = await server.token(ALICE);
    const call = toolsCall(9, 'create_ticket', { title: 'x' });
    await server.raw('POST', { ...call.headers, ...bearer(token) }, call.body);
    const audit = (await server.audit()).map((record) => JSON.stringify(record)).join('\n');
    expect(audit).toContain('"requestId":9');
    const signature = token.split('.')[2]!;
    for (const text of [audit, logLines.join('')]) {
      expect(text).not.toContain(signature);
      // No JWT at all (header.payload, base64url JSON).
      expect(text).not.toMatch(/eyJ[\w-]+\.eyJ/);
    }
  });
});
