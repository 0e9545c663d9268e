import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { VirtualClock } from '@quota-service/core';
import { APPROVAL_META_KEY, ApprovalTokens, guardTools, REFUSAL_META_KEY, type AuditRecord, type Principal } from '@quota-service/mcp';

// The guard's signed approval step on its own, as a stdio server would use it:
// a tool with `approval: { signed: true }`, a real SDK client that says yes to
// every elicitation, and tokens issued by the ApprovalTokens API.

const operator: Principal = { subject: 'operator', scopes: [], roles: ['agent'] };
const approver: Principal = { subject: 'approver', scopes: [], roles: ['approver'] };

let closeAll: (() => Promise<void>) | undefined;
afterEach(async () => {
  await closeAll?.();
  closeAll = undefined;
});

async function start(approvalTokens?: ApprovalTokens) {
  const server = new McpServer({ name: 'signed-approval-test', version: '1.0.0' });
  const audit: AuditRecord[] = [];
  const guard = guardTools(server, {
    quota: { allow: async () => Promise.reject(new Error('no quota step in this test')) },
    audit: { write: async (record) => void audit.push(record) },
    principal: operator,
    ...(approvalTokens === undefined ? {} : { approvalTokens }),
    logger: pino({ level: 'silent' }),
  });
  const runs: string[] = [];
  guard.registerTool('purge_ticket', { inputSchema: { ticketId: z.string() } }, { approval: { signed: true } }, async ({ ticketId }) => {
    runs.push(ticketId);
    return { content: [{ type: 'text', text: `purged ${ticketId}` }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'yes-to-everything', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { approve: true } }));
  await client.connect(clientSide);
  closeAll = async () => {
    await client.close();
    await server.close();
  };
  const purge = async (ticketId: string, token?: string) =>
    (await client.callTool({
      name: 'purge_ticket',
      arguments: { ticketId },
      ...(token === undefined ? {} : { _meta: { [APPROVAL_META_KEY]: token } }),
    })) as CallToolResult;
  return { purge, runs, audit };
}

describe('guard: approval { signed: true }', () => {
  it('without approval tokens configured the tool is refused, never approved by elicitation', async () => {
    const { purge, runs, audit } = await start();
    const refused = await purge('T-1');
    expect(refused._meta?.[REFUSAL_META_KEY]).toEqual({ reason: 'approval_unavailable', retryable: false });
    expect(runs).toEqual([]);
    expect(audit.at(-1)).toMatchObject({ steps: { approval: 'unsupported' }, result: 'refused' });
  });

  it('runs only with a token another principal signed for this call', async () => {
    const tokens = new ApprovalTokens({ secret: 'guard-test-secret-0123456789abcdef', clock: new VirtualClock(Date.UTC(2026, 0, 1)) });
    const { purge, runs, audit } = await start(tokens);

    const refused = await purge('T-1');
    const { approvalRequest } = refused._meta?.[REFUSAL_META_KEY] as { approvalRequest: { tool: string; arguments: unknown; requester: { subject: string } } };
    expect(approvalRequest).toEqual({ tool: 'purge_ticket', arguments: { ticketId: 'T-1' }, requester: { subject: 'operator' } });
    expect(runs).toEqual([]);

    expect(() => tokens.issue(approvalRequest, operator)).toThrow('an approver cannot approve its own calls');
    const { token } = tokens.issue(approvalRequest, approver);
    expect((await purge('T-1', token)).content[0]).toEqual({ type: 'text', text: 'purged T-1' });
    expect(runs).toEqual(['T-1']);
    expect(audit.at(-1)).toMatchObject({
      principal: { subject: 'operator' },
      approver: { subject: 'approver' },
      steps: { approval: 'approved' },
      result: 'ok',
    });
  });
});
