// The tool guard on an SDK 1.x server (@modelcontextprotocol/sdk, protocol revision
// 2025-11-25), over stdio: what a server that has not moved to SDK 2.x needs. The
// reference server (clients/mcp-server) is the same guard on SDK 2.x. Logs go to
// stderr: stdout is the protocol channel.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { pino } from 'pino';
import { z } from 'zod';
import { createQuotaClient } from '@quota-service/client';
import { guardTools } from '@quota-service/mcp';

const env = z
  .object({
    MCP_QUOTA_ADDR: z.string().min(1).default('127.0.0.1:50051'),
    MCP_QUOTA_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(500),
    MCP_STDIO_SUBJECT: z.string().min(1, 'required: who runs this process (the principal of every call)'),
    MCP_STDIO_SCOPES: z.string().default(''),
    MCP_AUDIT_FILE: z.string().min(1).optional(),
  })
  .safeParse({
    MCP_QUOTA_ADDR: process.env.MCP_QUOTA_ADDR || undefined,
    MCP_QUOTA_TIMEOUT_MS: process.env.MCP_QUOTA_TIMEOUT_MS || undefined,
    MCP_STDIO_SUBJECT: process.env.MCP_STDIO_SUBJECT ?? '',
    MCP_STDIO_SCOPES: process.env.MCP_STDIO_SCOPES || undefined,
    MCP_AUDIT_FILE: process.env.MCP_AUDIT_FILE || undefined,
  });
if (!env.success) {
  process.stderr.write(`mcp-server-v1: invalid configuration:\n${env.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}\n`);
  process.exit(1);
}
const config = env.data;
const logger = pino({ name: 'mcp-server-v1' }, pino.destination(2));
const quota = createQuotaClient({ address: config.MCP_QUOTA_ADDR, deadlineMs: config.MCP_QUOTA_TIMEOUT_MS, logger });
let tickets = 0;

const server = new McpServer({ name: 'help-desk-v1', version: '0.1.0' });
const guard = guardTools(server, {
  quota,
  audit: config.MCP_AUDIT_FILE,
  // stdio has no token: the operator says who runs the process.
  principal: { subject: config.MCP_STDIO_SUBJECT, scopes: config.MCP_STDIO_SCOPES.split(',').filter((s) => s !== ''), roles: [] },
  logger,
});
guard.registerTool(
  'create_ticket',
  { description: 'Open a help-desk ticket (policy mcp-create-ticket).', inputSchema: { title: z.string().min(1).max(200) } },
  { scopes: ['tickets:write'], quota: { policy: 'mcp-create-ticket', failureMode: 'closed' } },
  async ({ title }) => ({ content: [{ type: 'text', text: `Created ticket T-${++tickets}: ${title}.` }] }),
);

await server.connect(new StdioServerTransport());
process.stdin.once('end', () => {
  void server.close().then(() => quota.close());
});
