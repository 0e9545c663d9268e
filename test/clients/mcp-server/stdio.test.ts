import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CallToolResult, Client } from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSAL_META_KEY } from '../../../clients/mcp/src/refusals.js';
import { VirtualClock } from '@quota-service/core';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';
import { TS_NODE_ARGS } from '../../support/ts-node-args.js';

// The reference server as an MCP host runs it: a child process on stdio, here
// under tsx so no build is needed, talking to a real quota service. The 2.x client
// is pinned to 2026-07-28: no initialize handshake, the revision's envelope per request.
let service: TestService;
let dir: string;
let client: Client;
let stderr = '';

beforeAll(async () => {
  service = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
  dir = await mkdtemp(join(tmpdir(), 'mcp-stdio-'));
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...TS_NODE_ARGS, 'clients/mcp-server/main.ts'],
    env: {
      ...getDefaultEnvironment(),
      MCP_TRANSPORT: 'stdio',
      MCP_QUOTA_ADDR: `127.0.0.1:${service.server.port}`,
      // A loaded test machine must not turn a slow answer into a fail-closed refusal.
      MCP_QUOTA_TIMEOUT_MS: '5000',
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
      MCP_STDIO_SUBJECT: 'local-operator',
      MCP_STDIO_SCOPES: 'tickets:read,tickets:write,customers:read',
      MCP_STDIO_ROLES: 'agent',
    },
    cwd: process.cwd(),
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk) => (stderr += String(chunk)));
  client = new Client({ name: 'stdio-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(transport);
});
afterAll(async () => {
  await client?.close();
  await service?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('reference MCP server over stdio', () => {
  it('lists the three primitives', async () => {
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['bulk_update_tickets', 'create_ticket', 'delete_customer']);
    expect((await client.listResourceTemplates()).resourceTemplates[0]?.uriTemplate).toBe('customers://{customerId}');
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(['incident_review']);
  });

  it('calls run as the configured stdio principal, and the bulk tool spends per ticket really updated', async () => {
    const created = (await client.callTool({ name: 'create_ticket', arguments: { title: 'disk full' } })) as CallToolResult;
    expect(created.structuredContent).toEqual({ id: 'T-1', status: 'open' });
    const bulk = (await client.callTool({ name: 'bulk_update_tickets', arguments: { ticketIds: ['T-1', 'T-9'], status: 'closed' } })) as CallToolResult;
    expect(bulk.content[0]).toEqual({ type: 'text', text: 'Updated 1 ticket(s) to closed. Not found: T-9.' });
    const probe = await service.client.allow({ policy: 'mcp-bulk-tickets', identity: { user: 'local-operator' }, cost: 1 });
    // Two ids reserved, one ticket updated: the settlement gave the unknown id's unit back (50 - 1 - the probe's 1).
    expect(probe.limits[0]?.remaining).toBe(48);
    expect(bulk.structuredContent).toEqual({ updated: ['T-1'], missing: ['T-9'] });

    const records = (await readFile(join(dir, 'audit.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records.map((r: { principal: { subject: string } }) => r.principal.subject)).toEqual(['local-operator', 'local-operator']);
  });

  it('a sensitive tool is refused when the host supports no elicitation (no approver configured)', async () => {
    const refused = (await client.callTool({ name: 'delete_customer', arguments: { customerId: 'c-100' } })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(refused._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'approval_unavailable', retryable: false });
  });

  it('stdout carries only the protocol: the server logs to stderr', () => {
    expect(stderr).toContain('MCP server on stdio');
  });
});
