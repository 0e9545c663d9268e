import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CallToolResult, Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { REFUSAL_META_KEY } from '@quota-service/mcp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedPort } from '../../support/closed-port.js';
import { type McpProcess, startDevIssuerProcess, startMcpServerProcess } from '../../support/mcp-server-process.js';
import { ALICE } from './http-harness.js';

// main.ts and dev-issuer/main.ts apply the MCP_* variables: the two processes as
// `make run-mcp` starts them, the server pointed at the issuer by MCP_AUTHORIZATION_SERVER.

let issuer: McpProcess;
let issuerUrl: string;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mcp-env-'));
  issuer = await startDevIssuerProcess();
  issuerUrl = String(issuer.ready['issuer']);
});
afterAll(async () => {
  await issuer?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

async function connect(port: number): Promise<Client> {
  const client = new Client({ name: 'env-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  const authProvider = new ClientCredentialsProvider({ clientId: ALICE.id, clientSecret: ALICE.secret, expectedIssuer: issuerUrl });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://localhost:${port}/mcp`), { authProvider }));
  return client;
}

/** A create_ticket call as a 2025-06-18 client sends it (no Mcp-Method, no Mcp-Name unless given), with alice's token, straight to the process. */
async function legacyToolCall(port: number, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', resource: `http://localhost:${port}/mcp` });
  const basic = Buffer.from(`${ALICE.id}:${ALICE.secret}`).toString('base64');
  const issued = await fetch(`${issuerUrl}/token`, { method: 'POST', headers: { authorization: `Basic ${basic}` }, body: form });
  const { access_token } = (await issued.json()) as { access_token: string };
  const response = await fetch(`http://localhost:${port}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      authorization: `Bearer ${access_token}`,
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'create_ticket', arguments: { title: 'x' } } }),
  });
  return { status: response.status, body: await response.text() };
}

describe('reference MCP server process configured through the environment', () => {
  let server: McpProcess;
  let client: Client;

  beforeAll(async () => {
    server = await startMcpServerProcess({
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_AUTHORIZATION_SERVER: issuerUrl,
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
      MCP_ALLOWED_ORIGINS: 'https://inspector.example',
    });
    client = await connect(server.port);
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
  });

  it('MCP_AUTHORIZATION_SERVER: the metadata names the issuer, whose tokens (audience: the default resource URL) are accepted', async () => {
    expect(server.ready['resource']).toBe(`http://localhost:${server.port}/mcp`);
    const metadata = (await (await fetch(`http://127.0.0.1:${server.port}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(metadata).toMatchObject({ resource: `http://localhost:${server.port}/mcp`, authorization_servers: [issuerUrl] });
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('create_ticket');
  });

  it('MCP_ALLOWED_ORIGINS: the listed origin is served, any other gets 403', async () => {
    const post = (origin: string) =>
      fetch(`http://127.0.0.1:${server.port}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', origin }, body: '{}' });
    // Past the Origin check the request meets authentication: 401, not 403.
    expect((await post('https://inspector.example')).status).toBe(401);
    expect((await post(`http://127.0.0.1:${server.port}`)).status).toBe(403);
  });

  it('MCP_ROUTING_HEADERS unset (required): a 2025-era tools/call without Mcp-Method and Mcp-Name is refused, and audited in MCP_AUDIT_FILE', async () => {
    const response = await legacyToolCall(server.port);
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ id: 5, error: { code: -32020 } });
    const audit = await readFile(join(dir, 'audit.jsonl'), 'utf8');
    expect(audit).toContain(
      '"reason":"the request headers and body disagree: the body calls a tool but the required Mcp-Method header is absent: answered 400"',
    );
  });

  it('without MCP_APPROVAL_SECRET it warns that delete_customer is approved by the calling client', () => {
    expect(server.stderr()).toContain('delete_customer is approved by elicitation: the calling client answers for itself');
  });
});

describe('reference MCP server process with MCP_APPROVAL_SECRET and MCP_ROUTING_HEADERS=optional', () => {
  let server: McpProcess;
  let client: Client;

  beforeAll(async () => {
    server = await startMcpServerProcess({
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_AUTHORIZATION_SERVER: issuerUrl,
      MCP_AUDIT_FILE: join(dir, 'audit-signed.jsonl'),
      MCP_APPROVAL_SECRET: 'an-approval-secret-of-32-characters!',
      MCP_ROUTING_HEADERS: 'optional',
    });
    client = await connect(server.port);
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
  });

  it('delete_customer needs a signed approval, and approvers get approve_tool_call', async () => {
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'approve_tool_call',
      'bulk_update_tickets',
      'create_ticket',
      'delete_customer',
    ]);
    const refused = (await client.callTool({ name: 'delete_customer', arguments: { customerId: 'c-100' } })) as CallToolResult;
    expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'approval_required' });
  });

  it('MCP_ROUTING_HEADERS=optional: a 2025-era tools/call without the headers reaches the tool (refused there: no quota service); one whose header names another tool does not', async () => {
    const response = await legacyToolCall(server.port);
    expect(response.status).toBe(200);
    expect(response.body).toContain('"reason":"quota_unavailable"');
    const disguised = await legacyToolCall(server.port, { 'mcp-method': 'tools/call', 'mcp-name': 'search' });
    expect(disguised.status).toBe(400);
    expect(JSON.parse(disguised.body)).toMatchObject({ id: 5, error: { code: -32020 } });
  });
});

describe('reference MCP server process refusing to start', () => {
  it('HTTP without MCP_AUTHORIZATION_SERVER, or with one that serves no metadata, exits naming what to fix', async () => {
    await expect(startMcpServerProcess({})).rejects.toThrow(/MCP_AUTHORIZATION_SERVER: required with MCP_TRANSPORT=http/);
    const nowhere = `http://127.0.0.1:${await closedPort()}`;
    await expect(startMcpServerProcess({ MCP_AUTHORIZATION_SERVER: nowhere })).rejects.toThrow(`no authorization server metadata for ${nowhere}`);
  });

  it('stdio without MCP_STDIO_SUBJECT exits naming it', async () => {
    await expect(startMcpServerProcess({ MCP_TRANSPORT: 'stdio' })).rejects.toThrow(/MCP_STDIO_SUBJECT: required with MCP_TRANSPORT=stdio/);
  });
});
