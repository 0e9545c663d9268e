import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitRequestSchema, type ElicitRequest, type ElicitResult, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { pino, type Logger } from 'pino';
import { guardTools, type Approver, type AuditRecord, type Principal, type QuotaDecider } from '@quota-service/mcp';

export const alice: Principal = { subject: 'alice', scopes: ['tickets:read', 'tickets:write'], roles: ['agent'] };

export interface HarnessOptions {
  quota: QuotaDecider;
  /** The configured (stdio-style) principal. */
  principal?: Principal;
  /** A verified credential the transport attaches to every request (what HTTP bearer auth does). */
  authInfo?: AuthInfo;
  /** When set, the client declares form elicitation and answers approvals with this. */
  elicitation?: (request: ElicitRequest) => ElicitResult;
  approver?: Approver;
  logger?: Logger;
}

export interface Harness {
  client: Client;
  /** How many times each tool body ran. */
  runs: Record<string, number>;
  auditRecords(): Promise<AuditRecord[]>;
  auditText(): Promise<string>;
  close(): Promise<void>;
}

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

/**
 * A guarded McpServer with four tools (each body counts its runs) and a real SDK
 * Client over the in-memory transport, auditing to a JSON lines file.
 */
export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-guard-'));
  const auditPath = join(dir, 'audit.jsonl');
  const runs: Record<string, number> = { create_ticket: 0, bulk_update_tickets: 0, delete_customer: 0, search_tickets: 0 };

  const server = new McpServer({ name: 'guard-test', version: '1.0.0' });
  const guard = guardTools(server, {
    quota: options.quota,
    audit: auditPath,
    ...(options.principal === undefined ? {} : { principal: options.principal }),
    ...(options.approver === undefined ? {} : { approver: options.approver }),
    logger: options.logger ?? pino({ level: 'silent' }),
  });
  guard.registerTool(
    'create_ticket',
    {
      description: 'Create a ticket',
      // `user` is an ordinary argument: it must never become the quota or audit identity.
      inputSchema: { title: z.string().min(1), user: z.string().optional() },
      outputSchema: { id: z.string() },
    },
    { scopes: ['tickets:write'], quota: { policy: 'mcp-create-ticket', failureMode: 'closed' } },
    async ({ title }) => {
      runs['create_ticket'] = (runs['create_ticket'] ?? 0) + 1;
      const id = `T-${runs['create_ticket']}`;
      return { content: [{ type: 'text', text: `created ${id}: ${title}` }], structuredContent: { id } };
    },
  );
  guard.registerTool(
    'bulk_update_tickets',
    { description: 'Update many tickets', inputSchema: { ticketIds: z.array(z.string()).min(1), status: z.string() } },
    { scopes: ['tickets:write'], quota: { policy: 'mcp-bulk-tickets', cost: ({ ticketIds }) => ticketIds.length } },
    async ({ ticketIds }) => {
      runs['bulk_update_tickets'] = (runs['bulk_update_tickets'] ?? 0) + 1;
      return { content: [{ type: 'text', text: `updated ${ticketIds.length}` }] };
    },
  );
  guard.registerTool(
    'delete_customer',
    { description: 'Delete a customer record', inputSchema: { customerId: z.string() } },
    { roles: ['agent', 'admin'], approval: { message: ({ customerId }) => `Delete customer ${customerId}?` }, quota: { policy: 'mcp-sensitive' } },
    async ({ customerId }) => {
      runs['delete_customer'] = (runs['delete_customer'] ?? 0) + 1;
      return { content: [{ type: 'text', text: `deleted ${customerId}` }] };
    },
  );
  guard.registerTool(
    'search_tickets',
    { description: 'Search tickets (a read: fails open)', inputSchema: { query: z.string() } },
    { scopes: ['tickets:read'], quota: { policy: 'mcp-create-ticket', failureMode: 'open' } },
    async () => {
      runs['search_tickets'] = (runs['search_tickets'] ?? 0) + 1;
      return { content: [{ type: 'text', text: 'no tickets' }] };
    },
  );

  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client(
    { name: 'guard-test-client', version: '1.0.0' },
    { capabilities: options.elicitation === undefined ? {} : { elicitation: { form: {} } } },
  );
  const answer = options.elicitation;
  if (answer !== undefined) client.setRequestHandler(ElicitRequestSchema, async (request) => answer(request));
  await client.connect(options.authInfo === undefined ? clientSide : new CredentialedTransport(clientSide, options.authInfo));
  // Caches output schemas, so the client validates structuredContent as a host would.
  await client.listTools();

  const auditText = async () => readFile(auditPath, 'utf8').catch(() => '');
  return {
    client,
    runs,
    auditText,
    async auditRecords() {
      return (await auditText())
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as AuditRecord);
    },
    async close() {
      await client.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
