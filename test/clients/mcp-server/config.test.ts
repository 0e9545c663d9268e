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
});
