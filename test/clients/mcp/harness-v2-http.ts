import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { type AuthInfo, type CallToolResult, createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { pino } from 'pino';
import { z } from 'zod';
import type { ToolResult } from '@quota-service/mcp';
import { guardTools } from '@quota-service/mcp/v2';
import { auditFile, guardedTools, type Harness, type HarnessOptions } from './guard-harness.js';

/**
 * An SDK 2.x server on the protocol revision 2026-07-28: `createMcpHandler` builds a
 * guarded McpServer per request, and an SDK 2.x Client pinned to 2026-07-28 reaches it
 * through the Streamable HTTP client transport, whose fetch hands each request to the
 * handler in-process (with the credential, as bearer auth would).
 */
export async function startV2HttpHarness(options: HarnessOptions): Promise<Harness> {
  const audit = await auditFile();
  const runs: Record<string, number> = { create_ticket: 0, bulk_update_tickets: 0, delete_customer: 0, search_tickets: 0 };
  const logger = options.logger ?? pino({ level: 'silent' });
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'guard-test', version: '1.0.0' });
    const guard = guardTools(server, {
      quota: options.quota,
      audit: audit.path,
      ...(options.principal === undefined ? {} : { principal: options.principal }),
      ...(options.approver === undefined ? {} : { approver: options.approver }),
      logger,
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
    return server;
  });
  const authInfo = options.authInfo as AuthInfo | undefined;
  const transport = new StreamableHTTPClientTransport(new URL('http://localhost/mcp'), {
    fetch: (url, init) => handler.fetch(new Request(url, init), authInfo === undefined ? {} : { authInfo }),
  });
  const client = new Client(
    { name: 'guard-test-client', version: '1.0.0' },
    {
      capabilities: options.elicitation === undefined ? {} : { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    },
  );
  const answer = options.elicitation;
  if (answer !== undefined) client.setRequestHandler('elicitation/create', async (request) => answer(request));
  await client.connect(transport);
  // Caches output schemas, so the client validates structuredContent as a host would.
  await client.listTools();

  return {
    callTool: async (name, args, options) => (await client.callTool({ name, arguments: args }, options)) as ToolResult,
    runs,
    auditText: audit.text,
    auditRecords: audit.records,
    async close() {
      await client.close();
      await handler.close();
      await audit.remove();
    },
  };
}
