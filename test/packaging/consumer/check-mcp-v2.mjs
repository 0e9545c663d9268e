import { Client } from '@modelcontextprotocol/client';
import { InMemoryTransport, McpServer } from '@modelcontextprotocol/server';
import { guardTools, REFUSAL_META_KEY } from '@quota-service/mcp/v2';
import { check, eleventhDenied, ten } from './assert.mjs';

/**
 * check-mcp.mjs on SDK 2.x: a McpServer of @modelcontextprotocol/server whose tool is
 * guarded by @quota-service/mcp/v2, called by a real SDK 2.x Client in memory.
 */
export async function checkMcpV2(client) {
  await eleventhDenied('mcp-v2', async (user) => {
    const records = [];
    const runs = { count: 0 };
    const server = new McpServer({ name: 'packaging-consumer', version: '1.0.0' });
    const guard = guardTools(server, {
      quota: client,
      // The operator-configured principal of a stdio server: its subject is the quota identity.
      principal: { subject: user, scopes: [], roles: [] },
      // In memory: the default sink would write mcp-audit.jsonl into the working directory.
      audit: { write: async (record) => void records.push(record) },
    });
    guard.registerTool('place_order', { description: 'Place an order' }, { quota: { policy: 'orders' } }, async () => {
      runs.count++;
      return { content: [{ type: 'text', text: 'order placed' }] };
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const mcp = new Client({ name: 'packaging-consumer-client', version: '1.0.0' });
    await mcp.connect(clientSide);
    try {
      const call = () => mcp.callTool({ name: 'place_order', arguments: {} });
      await ten(async (i) => {
        const result = await call();
        check(result.isError !== true, `mcp v2: call #${i} was refused: ${JSON.stringify(result)}`);
        check(result.content[0]?.text === 'order placed', `mcp v2: call #${i} returned ${JSON.stringify(result.content)}`);
      });
      const result = await call();
      if (result.isError !== true) return 'admitted';
      const shown = JSON.stringify(result);
      const text = result.content[0]?.text ?? '';
      check(text.startsWith('Rate limit reached for tool place_order (policy orders).'), `mcp v2: the refusal text is ${JSON.stringify(text)}`);
      check(result._meta?.[REFUSAL_META_KEY]?.reason === 'rate_limited', `mcp v2: the refusal's _meta says ${shown}`);
      check(runs.count === 10, `mcp v2: the tool body ran ${runs.count} times, expected 10 (a refused call must not run it)`);
      const last = records.at(-1);
      check(
        records.length === 11 && last?.result === 'refused' && last.steps.quota.outcome === 'denied',
        `mcp v2: the audit of the refused call is ${JSON.stringify(last)}`,
      );
      return 'denied';
    } finally {
      await mcp.close();
      await server.close();
    }
  });
}
