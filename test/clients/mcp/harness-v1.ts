import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type CallToolResult, ElicitRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { guardTools, type ToolResult } from '@quota-service/mcp';
import { auditFile, guardedTools, type Harness, type HarnessOptions } from './guard-harness.js';

/** Hands the server `authInfo` with every message, as the HTTP transport does after bearer auth. */
class CredentialedTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  constructor(
    private readonly inner: InMemoryTransport,
    private readonly authInfo: AuthInfo,
  ) {
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
    inner.onmessage = (message) => this.onmessage?.(message);
  }
  start = () => this.inner.start();
  close = () => this.inner.close();
  send = (message: JSONRPCMessage, options?: TransportSendOptions) => this.inner.send(message, { ...options, authInfo: this.authInfo });
}

/** An SDK 1.x McpServer guarded by `@quota-service/mcp`, and an SDK 1.x Client over the in-memory transport. */
export async function startV1Harness(options: HarnessOptions): Promise<Harness> {
  const audit = await auditFile();
  const runs: Record<string, number> = { create_ticket: 0, bulk_update_tickets: 0, delete_customer: 0, search_tickets: 0 };
  const server = new McpServer({ name: 'guard-test', version: '1.0.0' });
  const guard = guardTools(server, {
    quota: options.quota,
    audit: audit.path,
    ...(options.principal === undefined ? {} : { principal: options.principal }),
    ...(options.approver === undefined ? {} : { approver: options.approver }),
    logger: options.logger ?? pino({ level: 'silent' }),
  });
  for (const tool of [...guardedTools(runs), ...(options.extraTools ?? [])]) {
    guard.registerTool(
      tool.name,
      { description: tool.description, inputSchema: tool.input, ...(tool.output === undefined ? {} : { outputSchema: tool.output }) },
      tool.policy,
      tool.body as (args: unknown) => Promise<CallToolResult>,
    );
  }

  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client(
    { name: 'guard-test-client', version: '1.0.0' },
    { capabilities: options.elicitation === undefined ? {} : { elicitation: { form: {} } } },
  );
  const answer = options.elicitation;
  if (answer !== undefined) client.setRequestHandler(ElicitRequestSchema, async (request) => answer(request));
  await client.connect(options.authInfo === undefined ? clientSide : new CredentialedTransport(clientSide, options.authInfo as AuthInfo));
  // Caches output schemas, so the client validates structuredContent as a host would.
  await client.listTools();

  return {
    callTool: async (name, args, options) => (await client.callTool({ name, arguments: args }, undefined, options)) as ToolResult,
    runs,
    auditText: audit.text,
    auditRecords: audit.records,
    async close() {
      await client.close();
      await server.close();
      await audit.remove();
    },
  };
}
