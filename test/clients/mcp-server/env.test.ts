import { mkdtemp, rm } from 'node:fs/promises';
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

  it('without MCP_APPROVAL_SECRET it warns that delete_customer is approved by the calling client', () => {
    expect(server.stderr()).toContain('delete_customer is approved by elicitation: the calling client answers for itself');
  });
});

describe('reference MCP server process with MCP_APPROVAL_SECRET', () => {
  let server: McpProcess;
  let client: Client;

  beforeAll(async () => {
    server = await startMcpServerProcess({
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_AUTHORIZATION_SERVER: issuerUrl,
      MCP_AUDIT_FILE: join(dir, 'audit-signed.jsonl'),
      MCP_APPROVAL_SECRET: 'an-approval-secret-of-32-characters!',
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
