import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Approver, AuditRecord, GuardQuota, Principal, ToolPolicy, ToolResult, VerifiedCredential } from '@quota-service/mcp';

// What the guard suite needs of a guarded server and its client, whatever the SDK
// line: each line's harness (harness-v1.ts, harness-v2.ts) builds the same four
// tools from `guardedTools` and connects a real SDK client of its own line.

export const alice: Principal = { subject: 'alice', scopes: ['tickets:read', 'tickets:write'], roles: ['agent'] };

/** An elicitation request as the client's handler sees it, and its answer. */
export interface ElicitQuestion {
  params: { message: string };
}
export type ElicitAnswer = { action: 'accept'; content: Record<string, string | number | boolean | string[]> } | { action: 'decline' } | { action: 'cancel' };

export interface HarnessOptions {
  quota: GuardQuota;
  /** Tools registered beside the four of the suite (their bodies count their own runs). */
  extraTools?: GuardedTool[];
  /** The configured (stdio-style) principal. */
  principal?: Principal;
  /** A verified credential the transport attaches to every request (what HTTP bearer auth does). */
  authInfo?: VerifiedCredential & { token: string };
  /** When set, the client declares form elicitation and answers approvals with this. */
  elicitation?: (request: ElicitQuestion) => ElicitAnswer;
  approver?: Approver;
  logger?: Logger;
}

export interface Harness {
  /** `signal`: aborting it cancels the call (the client sends notifications/cancelled). */
  callTool(name: string, args: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<ToolResult>;
  /** How many times each tool body ran. */
  runs: Record<string, number>;
  auditRecords(): Promise<AuditRecord[]>;
  auditText(): Promise<string>;
  close(): Promise<void>;
}

/** One guarded tool, as raw zod shapes: each SDK line registers it in its own idiom. */
export interface GuardedTool {
  name: string;
  description: string;
  input: z.ZodRawShape;
  output?: z.ZodRawShape;
  // biome-ignore lint/suspicious/noExplicitAny: the arguments are the zod-validated input of each tool
  policy: ToolPolicy<any>;
  // biome-ignore lint/suspicious/noExplicitAny: as above; the second argument is the SDK's extra (1.x) or ctx (2.x)
  body(args: any, extra?: any): Promise<ToolResult>;
}

/** The four tools of the suite; each body counts its runs in `runs`. */
export function guardedTools(runs: Record<string, number>): GuardedTool[] {
  const ran = (tool: string) => {
    runs[tool] = (runs[tool] ?? 0) + 1;
    return runs[tool];
  };
  return [
    {
      name: 'create_ticket',
      description: 'Create a ticket',
      // `user` is an ordinary argument: it must never become the quota or audit identity.
      input: { title: z.string().min(1), user: z.string().optional() },
      output: { id: z.string() },
      policy: { scopes: ['tickets:write'], quota: { policy: 'mcp-create-ticket', failureMode: 'closed' } },
      async body({ title }: { title: string }) {
        const id = `T-${ran('create_ticket')}`;
        return { content: [{ type: 'text', text: `created ${id}: ${title}` }], structuredContent: { id } };
      },
    },
    {
      name: 'bulk_update_tickets',
      description: 'Update many tickets',
      input: { ticketIds: z.array(z.string()).min(1), status: z.string() },
      policy: { scopes: ['tickets:write'], quota: { policy: 'mcp-bulk-tickets', cost: ({ ticketIds }: { ticketIds: string[] }) => ticketIds.length } },
      async body({ ticketIds }: { ticketIds: string[] }) {
        ran('bulk_update_tickets');
        return { content: [{ type: 'text', text: `updated ${ticketIds.length}` }] };
      },
    },
    {
      name: 'delete_customer',
      description: 'Delete a customer record',
      input: { customerId: z.string() },
      policy: {
        roles: ['agent', 'admin'],
        approval: { message: ({ customerId }: { customerId: string }) => `Delete customer ${customerId}?` },
        quota: { policy: 'mcp-sensitive' },
      },
      async body({ customerId }: { customerId: string }) {
        ran('delete_customer');
        return { content: [{ type: 'text', text: `deleted ${customerId}` }] };
      },
    },
    {
      name: 'search_tickets',
      description: 'Search tickets (a read: fails open)',
      input: { query: z.string() },
      policy: { scopes: ['tickets:read'], quota: { policy: 'mcp-create-ticket', failureMode: 'open' } },
      async body() {
        ran('search_tickets');
        return { content: [{ type: 'text', text: 'no tickets' }] };
      },
    },
  ];
}

/** A fresh audit file, its readers, and its removal. */
export async function auditFile() {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-guard-'));
  const path = join(dir, 'audit.jsonl');
  const text = async () => readFile(path, 'utf8').catch(() => '');
  return {
    path,
    text,
    async records() {
      return (await text())
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as AuditRecord);
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
