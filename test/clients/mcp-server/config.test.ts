import { describe, expect, it } from 'vitest';
import { loadMcpServerConfig } from '../../../clients/mcp-server/config.js';

describe('reference MCP server configuration', () => {
  it('MCP_ALLOWED_ORIGINS: unset means the server origin only; set, a list of http(s) origins in Origin header form', () => {
    expect(loadMcpServerConfig({}).allowedOrigins).toBeUndefined();
    expect(loadMcpServerConfig({ MCP_ALLOWED_ORIGINS: 'https://inspector.example/, http://localhost:6274' }).allowedOrigins).toEqual([
      'https://inspector.example',
      'http://localhost:6274',
    ]);
    for (const bad of ['null', 'file:///tmp/page.html', 'inspector.example']) {
      expect(() => loadMcpServerConfig({ MCP_ALLOWED_ORIGINS: bad })).toThrow(/MCP_ALLOWED_ORIGINS/);
    }
  });

  it('session limits: 15 minutes idle and 16 sessions per principal unless MCP_SESSION_IDLE_TIMEOUT_MS / MCP_MAX_SESSIONS_PER_PRINCIPAL say otherwise', () => {
    const defaults = loadMcpServerConfig({});
    expect(defaults.MCP_SESSION_IDLE_TIMEOUT_MS).toBe(900_000);
    expect(defaults.MCP_MAX_SESSIONS_PER_PRINCIPAL).toBe(16);
    const set = loadMcpServerConfig({ MCP_SESSION_IDLE_TIMEOUT_MS: '60000', MCP_MAX_SESSIONS_PER_PRINCIPAL: '2' });
    expect(set.MCP_SESSION_IDLE_TIMEOUT_MS).toBe(60_000);
    expect(set.MCP_MAX_SESSIONS_PER_PRINCIPAL).toBe(2);
    expect(() => loadMcpServerConfig({ MCP_SESSION_IDLE_TIMEOUT_MS: '0' })).toThrow(/MCP_SESSION_IDLE_TIMEOUT_MS/);
    expect(() => loadMcpServerConfig({ MCP_MAX_SESSIONS_PER_PRINCIPAL: '0' })).toThrow(/MCP_MAX_SESSIONS_PER_PRINCIPAL/);
    expect(() => loadMcpServerConfig({ MCP_MAX_SESSIONS_PER_PRINCIPAL: 'many' })).toThrow(/MCP_MAX_SESSIONS_PER_PRINCIPAL/);
  });

  it('MCP_APPROVAL_SECRET: unset means elicitation approval; set, at least 32 characters', () => {
    expect(loadMcpServerConfig({}).MCP_APPROVAL_SECRET).toBeUndefined();
    expect(loadMcpServerConfig({ MCP_APPROVAL_SECRET: 's'.repeat(32) }).MCP_APPROVAL_SECRET).toBe('s'.repeat(32));
    expect(() => loadMcpServerConfig({ MCP_APPROVAL_SECRET: 'short' })).toThrow(/MCP_APPROVAL_SECRET: must be at least 32 characters/);
  });
});
