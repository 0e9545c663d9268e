import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { guardTools, REFUSAL_META_KEY } from '@quota-service/mcp';
import { check, eleventhDenied, ten } from './assert.mjs';

/**
 * A McpServer whose tool is guarded by @quota-service/mcp with quota policy `orders`,
 * called by a real SDK Client over the in-memory transport: ten calls run the tool,
 * the 11th is a tool error result (isError: true) with the refusal text, body not run.
 */
export async function checkMcp(client) {
  await eleventhDenied('mcp', async (user) => {
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
        check(result.isError !== true, `mcp: call #${i} was refused: ${JSON.stringify(result)}`);
        check(result.content[0]?.text === 'order placed', `mcp: call #${i} returned ${JSON.stringify(result.content)}`);
      });
      const result = await call();
      if (result.isError !== true) return 'admitted';
      const shown = JSON.stringify(result);
      const text = result.content[0]?.text ?? '';
      check(text.startsWith('Rate limit reached for tool place_order (policy orders).'), `mcp: the refusal text is ${JSON.stringify(text)}`);
      check(result._meta?.[REFUSAL_META_KEY]?.reason === 'rate_limited', `mcp: the refusal's _meta says ${shown}`);
      check(runs.count === 10, `mcp: the tool body ran ${runs.count} times, expected 10 (a refused call must not run it)`);
      const last = records.at(-1);
      check(
        records.length === 11 && last?.result === 'refused' && last.steps.quota.outcome === 'denied',
        `mcp: the audit of the refused call is ${JSON.stringify(last)}`,
      );
      return 'denied';
    } finally {
      await mcp.close();
      await server.close();
    }
  });
}
