import { McpServer, ResourceTemplate } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { z } from 'zod';
import {
  type ApprovalTokens,
  type Approver,
  type AuditSink,
  guardTools,
  principalFromAuthInfo,
  type GuardQuota,
  type Principal,
  type ToolGuard,
  type ToolResult,
} from '@quota-service/mcp/v2';
import { registerApproveTool } from './approve-tool.js';
import type { HelpDesk } from './help-desk.js';

export interface ReferenceServerDeps {
  desk: HelpDesk;
  /** The quota client: allow(), and reserve() and acquire() for the bulk tool's settlement and the in-flight cap. */
  quota: GuardQuota;
  audit: AuditSink | string;
  /** stdio: the configured principal. HTTP: unset, the bearer token says who calls. */
  principal?: Principal;
  approver?: Approver;
  /**
   * Signed approvals: delete_customer then needs a token an approver signed
   * (approve_tool_call); unset, the connected client approves it by elicitation.
   */
  approvals?: ApprovalTokens;
  logger?: Logger;
}

/** Bulk updates touch at most this many tickets per call (the policy's bucket holds 50). */
const MAX_BULK = 50;

/**
 * The cap on tool calls in progress per tenant, across every replica (policy
 * mcp-tool-calls-in-flight, keyed by tenant). A stdio principal without a tenant
 * has no tenant to count: its calls are not capped (one process, one principal).
 */
function inFlightCap(principal: Principal | undefined): { concurrency?: { policy: string } } {
  return principal !== undefined && principal.tenant === undefined ? {} : { concurrency: { policy: 'mcp-tool-calls-in-flight' } };
}

/** The tickets bulk_update_tickets really updated, from its result. */
function ticketsUpdated(result: ToolResult): number | undefined {
  const updated = (result.structuredContent as { updated?: unknown } | undefined)?.updated;
  return Array.isArray(updated) ? updated.length : undefined;
}

/** Every scope the server's tools and resources ask for: the protected resource metadata lists them. */
export const REFERENCE_SCOPES = ['tickets:read', 'tickets:write', 'customers:read'];

/**
 * The reference MCP server on SDK 2.x: one of each primitive (tools, a resource, a
 * prompt). Tools go through the guard. On HTTP the SDK builds one per request (the
 * 2026-07-28 revision is stateless), all sharing one HelpDesk and quota client.
 * With a verified token (HTTP) a call lacking a tool's scope is answered 403
 * insufficient_scope, so the client can step up; on stdio the guard refuses it.
 */
export function createReferenceServer(deps: ReferenceServerDeps): McpServer {
  return createReferenceServerWithGuard(deps).server;
}

/** The reference server and its guard (whose checkPolicies() main runs at start). */
export function createReferenceServerWithGuard(deps: ReferenceServerDeps): { server: McpServer; guard: ToolGuard } {
  const server = new McpServer(
    { name: 'quota-guarded-help-desk', version: '0.1.0' },
    { instructions: 'Help-desk tools behind the quota service. A refused call says why in its text and under _meta["dev.quota-service/refusal"].' },
  );
  const guard = guardTools(server, {
    scopeChallenge: true,
    quota: deps.quota,
    audit: deps.audit,
    ...(deps.principal === undefined ? {} : { principal: deps.principal }),
    ...(deps.approver === undefined ? {} : { approver: deps.approver }),
    ...(deps.approvals === undefined ? {} : { approvalTokens: deps.approvals }),
    ...(deps.logger === undefined ? {} : { logger: deps.logger }),
  });
  const inFlight = inFlightCap(deps.principal);

  guard.registerTool(
    'create_ticket',
    {
      title: 'Create ticket',
      description: 'Open a help-desk ticket. Rate limited per user (policy mcp-create-ticket, cost 1).',
      inputSchema: z.object({ title: z.string().min(1).max(200), customerId: z.string().optional() }),
      outputSchema: z.object({ id: z.string(), status: z.string() }),
    },
    { scopes: ['tickets:write'], quota: { policy: 'mcp-create-ticket', cost: 1, failureMode: 'closed' }, ...inFlight },
    async ({ title, customerId }) => {
      const ticket = deps.desk.createTicket(title, customerId);
      return {
        content: [{ type: 'text', text: `Created ticket ${ticket.id}.` }],
        structuredContent: { id: ticket.id, status: ticket.status },
      };
    },
  );

  guard.registerTool(
    'bulk_update_tickets',
    {
      title: 'Bulk update tickets',
      description: `Set the status of up to ${MAX_BULK} tickets. Costs one quota unit per ticket really updated (policy mcp-bulk-tickets): one per id is reserved, and what was not updated is given back.`,
      inputSchema: z.object({ ticketIds: z.array(z.string().min(1)).min(1).max(MAX_BULK), status: z.enum(['open', 'pending', 'closed']) }),
      outputSchema: z.object({ updated: z.array(z.string()), missing: z.array(z.string()) }),
    },
    {
      scopes: ['tickets:write'],
      // Reserve one unit per id, settle one per ticket updated: unknown ids cost nothing.
      quota: { policy: 'mcp-bulk-tickets', estimate: ({ ticketIds }) => ticketIds.length, actual: ticketsUpdated },
      ...inFlight,
    },
    async ({ ticketIds, status }) => {
      const { updated, missing } = deps.desk.updateStatus(ticketIds, status);
      const text = `Updated ${updated.length} ticket(s) to ${status}.${missing.length > 0 ? ` Not found: ${missing.join(', ')}.` : ''}`;
      return { content: [{ type: 'text', text }], structuredContent: { updated, missing } };
    },
  );

  guard.registerTool(
    'delete_customer',
    {
      title: 'Delete customer',
      description:
        deps.approvals === undefined
          ? 'Delete a customer record. Sensitive: every call is approved first (the client is asked).'
          : 'Delete a customer record. Sensitive: every call needs a token from an approver (approve_tool_call), passed under _meta["dev.quota-service/approval"].',
      inputSchema: z.object({ customerId: z.string().min(1) }),
      annotations: { destructiveHint: true },
    },
    {
      roles: ['agent'],
      approval: { message: ({ customerId }) => `Delete customer record ${customerId}? This cannot be undone.`, signed: deps.approvals !== undefined },
      quota: { policy: 'mcp-sensitive', failureMode: 'closed' },
      ...inFlight,
    },
    async ({ customerId }) => {
      const deleted = deps.desk.deleteCustomer(customerId);
      return deleted
        ? { content: [{ type: 'text', text: `Deleted customer ${customerId}.` }] }
        : { content: [{ type: 'text', text: `No customer ${customerId}.` }], isError: true };
    },
  );

  if (deps.approvals !== undefined) registerApproveTool(guard, deps.approvals, ['delete_customer']);

  server.registerResource(
    'customer',
    new ResourceTemplate('customers://{customerId}', {
      list: async () => ({
        resources: deps.desk.customerIds().map((id) => ({ uri: `customers://${id}`, name: `customer ${id}`, mimeType: 'application/json' })),
      }),
    }),
    { title: 'Customer record', description: 'A customer record as JSON (scope customers:read).', mimeType: 'application/json' },
    async (uri, { customerId }, ctx) => {
      // Resources hold personal data: the same identity rule as tools, from the credential only.
      const authInfo = ctx.http?.authInfo;
      const principal = authInfo !== undefined ? principalFromAuthInfo(authInfo) : deps.principal;
      if (principal === undefined || !principal.scopes.includes('customers:read')) {
        throw new Error('Reading customer records is not permitted for this caller');
      }
      const customer = deps.desk.customer(String(customerId));
      if (customer === undefined) throw new Error(`No customer ${String(customerId)}`);
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(customer) }] };
    },
  );

  server.registerPrompt(
    'incident_review',
    {
      title: 'Incident review',
      description: 'A blameless incident review template.',
      argsSchema: z.object({ incidentId: z.string().min(1), severity: z.enum(['sev1', 'sev2', 'sev3']).optional() }),
    },
    ({ incidentId, severity }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text: [
              `Write a blameless review of incident ${incidentId}${severity === undefined ? '' : ` (${severity})`}.`,
              'Sections: Summary; Impact (who, how long); Timeline (UTC); Root cause; What went well; What went wrong;',
              'Action items (owner, due date). Use the customer records and tickets you can read; do not guess numbers.',
            ].join('\n'),
          },
        },
      ],
    }),
  );

  return { server, guard };
}
