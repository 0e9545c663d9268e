import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { REFUSAL_META_KEY } from '@quota-service/mcp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedPort } from '../../support/closed-port.js';
import { startMcpServerProcess, type McpServerProcess } from '../../support/mcp-server-process.js';

// main.ts applies the MCP_* variables: the reference server as `make run-mcp` starts it.

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

describe('reference MCP server process configured through the environment', () => {
  let server: McpServerProcess;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-env-'));
    server = await startMcpServerProcess({
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_DEV_TOKENS: 'config/mcp-dev-tokens.yaml',
      MCP_RESOURCE_URL: 'http://localhost:3333/mcp',
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
      MCP_ALLOWED_ORIGINS: 'https://inspector.example',
      MCP_MAX_SESSIONS_PER_PRINCIPAL: '1',
    });
  });
  afterAll(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const post = (headers: Record<string, string>) =>
    fetch(`http://127.0.0.1:${server.port}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: 'Bearer dev-alice-agent-token',
        ...headers,
      },
      body: INITIALIZE,
    });

  it('MCP_ALLOWED_ORIGINS: the listed origin is served, any other gets 403', async () => {
    const listed = await post({ origin: 'https://inspector.example' });
    expect(listed.status).toBe(200);
    await listed.body?.cancel();
    const other = await post({ origin: `http://127.0.0.1:${server.port}` });
    expect(other.status).toBe(403);
  });

  it('MCP_MAX_SESSIONS_PER_PRINCIPAL: past it, initialize gets 429', async () => {
    const first = await post({ authorization: 'Bearer dev-bob-viewer-token' });
    expect(first.status).toBe(200);
    await first.body?.cancel();
    const second = await post({ authorization: 'Bearer dev-bob-viewer-token' });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('900');
  });

  it('without MCP_APPROVAL_SECRET it warns that delete_customer is approved by the calling client', () => {
    expect(server.stderr()).toContain('delete_customer is approved by elicitation: the calling client answers for itself');
  });
});

describe('reference MCP server process with MCP_APPROVAL_SECRET', () => {
  let server: McpServerProcess;
  let dir: string;
  let client: Client;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-env-'));
    server = await startMcpServerProcess({
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_DEV_TOKENS: 'config/mcp-dev-tokens.yaml',
      MCP_RESOURCE_URL: 'http://localhost:3333/mcp',
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
      MCP_APPROVAL_SECRET: 'an-approval-secret-of-32-characters!',
    });
    client = new Client({ name: 'env-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { approve: true } }));
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.port}/mcp`), {
        requestInit: { headers: { authorization: 'Bearer dev-alice-agent-token' } },
      }),
    );
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
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
