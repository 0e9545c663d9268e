import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { VirtualClock } from '@quota-service/core';
import { REFUSAL_META_KEY } from '@quota-service/mcp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';
import { TS_NODE_ARGS } from '../../support/ts-node-args.js';

// The small SDK 1.x example (clients/mcp-server-v1) as a host runs it: a child
// process on stdio, a 1.x client with the 2025 handshake, a real quota service.

let service: TestService;
let dir: string;
const clients: Client[] = [];

beforeAll(async () => {
  service = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
  dir = await mkdtemp(join(tmpdir(), 'mcp-v1-'));
});
afterAll(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await service?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

async function start(subject: string, scopes: string): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...TS_NODE_ARGS, 'clients/mcp-server-v1/main.ts'],
    env: {
      ...getDefaultEnvironment(),
      MCP_QUOTA_ADDR: `127.0.0.1:${service.server.port}`,
      // A loaded test machine must not turn a slow answer into a fail-closed refusal.
      MCP_QUOTA_TIMEOUT_MS: '5000',
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
      MCP_STDIO_SUBJECT: subject,
      MCP_STDIO_SCOPES: scopes,
    },
    cwd: process.cwd(),
    stderr: 'pipe',
  });
  const client = new Client({ name: 'v1-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return client;
}

describe('the SDK 1.x example server', () => {
  it('guards its tool: the configured principal is charged, and over quota the call is an isError result with the _meta details', async () => {
    const client = await start('v1-operator', 'tickets:write');
    for (let i = 1; i <= 5; i++) {
      const created = (await client.callTool({ name: 'create_ticket', arguments: { title: `t${i}` } })) as CallToolResult;
      expect(created.content[0]).toEqual({ type: 'text', text: `Created ticket T-${i}: t${i}.` });
    }
    const denied = (await client.callTool({ name: 'create_ticket', arguments: { title: 't6' } })) as CallToolResult;
    expect(denied.isError).toBe(true);
    expect(denied._meta?.[REFUSAL_META_KEY]).toMatchObject({ reason: 'rate_limited', policy: 'mcp-create-ticket' });
    const records = (await readFile(join(dir, 'audit.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { principal: { subject: string }; result: string });
    expect(records.map((r) => [r.principal.subject, r.result])).toEqual([...Array(5).fill(['v1-operator', 'ok']), ['v1-operator', 'refused']]);
  });

  it('a principal without the tool’s scope is refused as not_permitted, and nothing is charged', async () => {
    const client = await start('v1-viewer', 'tickets:read');
    const refused = (await client.callTool({ name: 'create_ticket', arguments: { title: 'x' } })) as CallToolResult;
    expect(refused._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'not_permitted', retryable: false });
    const probe = await service.client.allow({ policy: 'mcp-create-ticket', identity: { user: 'v1-viewer' }, cost: 1 });
    expect(probe.limits[0]?.remaining).toBe(4);
  });
});
