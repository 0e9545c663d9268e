import { describe, expect, it } from 'vitest';
import { QuotaEngine } from '../../../src/engine/engine.js';
import { parseRlsConfig, readRlsTexts } from '../../../src/api/envoy/rls-config.js';
import { decideRls } from '../../../src/api/envoy/rls-decide.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { shippedPolicies } from '../../support/quota-service.js';

/** The shipped per-tool MCP example (config/rls-mcp-tools.yaml) limits tools/call per tool and per principal, as docs/envoy.md says. */
describe('config/rls-mcp-tools.yaml', () => {
  it('per principal per tool (a burst of 10), the expensive tool by its own rule, principals apart', async () => {
    const config = parseRlsConfig(await readRlsTexts('config/rls-mcp-tools.yaml'));
    const engine = new QuotaEngine(await shippedPolicies(), new MemoryStore());
    const call = (tool: string, principal: string) =>
      decideRls(
        engine,
        config,
        {
          domain: 'mcp-tools',
          hits_addend: 0,
          descriptors: [
            {
              entries: [
                { key: 'mcp_method', value: 'tools/call' },
                { key: 'mcp_tool', value: tool },
                { key: 'principal', value: principal },
              ],
            },
            {
              entries: [
                { key: 'mcp_method', value: 'tools/call' },
                { key: 'mcp_tool', value: tool },
              ],
            },
          ],
        },
        1_000,
      );
    const alice = [];
    for (let i = 0; i < 11; i++) alice.push((await call('search', 'alice')).over);
    expect(alice).toEqual([...Array(10).fill(false), true]);
    expect((await call('search', 'bob')).over).toBe(false);
    const ticket = await call('create_ticket', 'alice');
    expect(ticket.verdicts.map((v) => (v.kind === 'limited' ? v.rule.name : v.kind))).toEqual(['create-ticket-per-principal', 'create-ticket-total']);
    expect(ticket.over).toBe(false);
    await engine.failure.close();
  });
});
