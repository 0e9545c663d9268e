import { Client } from '@modelcontextprotocol/client';
import { type AuthInfo, type CallToolResult, InMemoryTransport, McpServer } from '@modelcontextprotocol/server';
import { pino } from 'pino';
import { z } from 'zod';
import type { ToolResult } from '@quota-service/mcp';
import { guardTools } from '@quota-service/mcp/v2';
import { auditFile, guardedTools, type Harness, type HarnessOptions } from './guard-harness.js';

/**
 * An SDK 2.x McpServer (`@modelcontextprotocol/server`) guarded by
 * `@quota-service/mcp/v2`, and an SDK 2.x Client over the SDK's in-memory transport.
 * Approvals travel as `input_required` results the client fulfils and retries.
 */
export async function startV2Harness(options: HarnessOptions): Promise<Harness> {
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
      {
        description: tool.description,
        inputSchema: z.object(tool.input),
        ...(tool.output === undefined ? {} : { outputSchema: z.object(tool.output) }),
      },
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
  if (answer !== undefined) client.setRequestHandler('elicitation/create', async (request) => answer(request));
  if (options.authInfo !== undefined) {
    // Hands the server `authInfo` with every message, as the HTTP transport does after bearer auth.
    const authInfo = options.authInfo as AuthInfo;
    const send = clientSide.send.bind(clientSide);
    clientSide.send = (message, sendOptions) => send(message, { ...sendOptions, authInfo });
  }
  await client.connect(clientSide);
  // Caches output schemas, so the client validates structuredContent as a host would.
  await client.listTools();

  return {
    callTool: async (name, args, options) => (await client.callTool({ name, arguments: args }, options)) as ToolResult,
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
