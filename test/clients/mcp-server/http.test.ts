import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { REFUSAL_META_KEY } from '../../../clients/mcp/src/refusals.js';
import { loadDevCredentials } from '../../../clients/mcp-server/dev-tokens.js';
import { HelpDesk } from '../../../clients/mcp-server/help-desk.js';
import { startHttpTransport, type RunningHttpServer } from '../../../clients/mcp-server/http-transport.js';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { createReferenceServer } from '../../../clients/mcp-server/reference-server.js';
import { VirtualClock } from '@quota-service/core';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';

// Tokens from the shipped dev token file (config/mcp-dev-tokens.yaml).
const ALICE = 'dev-alice-agent-token';
const BOB = 'dev-bob-viewer-token';
const ALICE_OTHER_AUDIENCE = 'dev-alice-other-audience-token';
const RESOURCE = new URL('http://localhost:3333/mcp');

let service: TestService;
let quota: QuotaClient;
let http: RunningHttpServer;
let dir: string;
let base: string;
const logLines: string[] = [];

beforeAll(async () => {
  service = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
  quota = createQuotaClient({ address: `127.0.0.1:${service.server.port}` });
  dir = await mkdtemp(join(tmpdir(), 'mcp-http-'));
  const credentials = await loadDevCredentials('config/mcp-dev-tokens.yaml');
  const logger = pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) });
  const desk = new HelpDesk();
  http = await startHttpTransport({
    host: '127.0.0.1',
    port: 0,
    resourceUrl: RESOURCE,
    allowedHosts: ['localhost', '127.0.0.1'],
    authorizationServers: ['https://auth.example.com'],
    verifier: credentials.verifier,
    createServer: () => createReferenceServer({ desk, quota, audit: join(dir, 'audit.jsonl'), logger }),
    logger,
  });
  base = `http://127.0.0.1:${http.port}`;
});
afterAll(async () => {
  await http?.close();
  await quota?.close();
  await service?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

async function connect(token: string, options: { elicit?: boolean } = {}): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', base), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'http-test', version: '1.0.0' }, { capabilities: options.elicit ? { elicitation: { form: {} } } : {} });
  if (options.elicit) client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { approve: true } }));
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

const audit = async () =>
  (await readFile(join(dir, 'audit.jsonl'), 'utf8').catch(() => ''))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { tool: string; principal: { subject: string; tenant?: string }; result: string; steps: { approval: string } });

/** A raw HTTP request, so the Host header can be anything. */
function rawPost(
  path: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${path}`,
      { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

describe('reference MCP server over Streamable HTTP', () => {
  it('a good token: tools, the customer resource and the incident prompt work, with the token holder as principal', async () => {
    const { client } = await connect(ALICE);
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

    const records = await audit();
    expect(records.at(-1)).toMatchObject({ tool: 'create_ticket', principal: { subject: 'alice', tenant: 'acme' }, result: 'ok' });
  });

  it('over quota: the HTTP client gets isError, the text and the _meta details', async () => {
    const { client } = await connect(ALICE);
    // alice spent 1 of 5 in the previous test (the memory store's clock is frozen).
    for (let i = 0; i < 4; i++) expect(((await client.callTool({ name: 'create_ticket', arguments: { title: 'x' } })) as CallToolResult).isError).toBeFalsy();
    const denied = (await client.callTool({ name: 'create_ticket', arguments: { title: 'x' } })) as CallToolResult;
    expect(denied.isError).toBe(true);
    expect(denied.content[0]).toEqual({
      type: 'text',
      text: 'Rate limit reached for tool create_ticket (policy mcp-create-ticket). Nothing was executed. Retry after 2 s.',
    });
    expect(denied._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'rate_limited', retryAfterMs: 2000 });
  });

  it('a viewer token is not permitted to create tickets', async () => {
    const { client } = await connect(BOB);
    const denied = (await client.callTool({ name: 'create_ticket', arguments: { title: 'x' } })) as CallToolResult;
    expect(denied._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'not_permitted' });
  });

  it('a sensitive tool asks the human over the call stream (elicitation) and runs when approved', async () => {
    const { client } = await connect(ALICE, { elicit: true });
    const deleted = (await client.callTool({ name: 'delete_customer', arguments: { customerId: 'c-100' } })) as CallToolResult;
    expect(deleted.content[0]).toEqual({ type: 'text', text: 'Deleted customer c-100.' });
    expect((await audit()).at(-1)).toMatchObject({ tool: 'delete_customer', steps: { approval: 'approved' }, result: 'ok' });
  });

  it('a bad token gets 401 with the protected resource metadata URL, and the SDK client cannot connect', async () => {
    const response = await rawPost('/mcp', { authorization: 'Bearer not-a-real-token-at-all' }, initialize);
    expect(response.status).toBe(401);
    expect(response.headers['www-authenticate']).toBe(
      'Bearer error="invalid_token", error_description="Unknown token", resource_metadata="http://localhost:3333/.well-known/oauth-protected-resource/mcp"',
    );
    await expect(connect('not-a-real-token-at-all')).rejects.toThrow();
    expect((await rawPost('/mcp', {}, initialize)).status).toBe(401);
  });

  it('a token issued for another resource (audience) gets 401', async () => {
    const response = await rawPost('/mcp', { authorization: `Bearer ${ALICE_OTHER_AUDIENCE}` }, initialize);
    expect(response.status).toBe(401);
    expect(JSON.parse(response.body)).toEqual({ error: 'invalid_token', error_description: 'Token was not issued for this resource' });
  });

  it('a Host header not in the allowed list gets 403 before auth (DNS rebinding protection)', async () => {
    const response = await rawPost('/mcp', { host: 'evil.example:3333', authorization: `Bearer ${ALICE}` }, initialize);
    expect(response.status).toBe(403);
    expect(JSON.parse(response.body)).toMatchObject({ error: { message: 'Invalid Host: evil.example' } });
    expect((await rawPost('/mcp', { host: `localhost:${http.port}`, authorization: `Bearer ${ALICE}` }, initialize)).status).toBe(200);
  });

  it('serves protected resource metadata (RFC 9728)', async () => {
    const response = await fetch(`${base}/.well-known/oauth-protected-resource/mcp`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      resource: 'http://localhost:3333/mcp',
      authorization_servers: ['https://auth.example.com'],
      bearer_methods_supported: ['header'],
      scopes_supported: ['tickets:read', 'tickets:write', 'customers:read'],
      resource_name: 'Quota-guarded help desk (reference MCP server)',
    });
  });

  it('another principal cannot use a session it did not open', async () => {
    const { transport } = await connect(ALICE);
    const sessionId = transport.sessionId!;
    const hijack = await rawPost(
      '/mcp',
      { authorization: `Bearer ${BOB}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    );
    expect(hijack.status).toBe(403);
  });

  it('no raw token in the audit file or the server log', async () => {
    const text = await readFile(join(dir, 'audit.jsonl'), 'utf8');
    expect(text.length).toBeGreaterThan(0);
    for (const token of [ALICE, BOB, ALICE_OTHER_AUDIENCE]) {
      expect(text).not.toContain(token);
      expect(logLines.join('')).not.toContain(token);
    }
  });
});
