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

  it('MCP_AUTHORIZATION_SERVER and MCP_RESOURCE_URL: http(s) URLs; the resource URL defaults to the bound port', () => {
    const set = loadMcpServerConfig({ MCP_AUTHORIZATION_SERVER: 'https://auth.example.com', MCP_RESOURCE_URL: 'https://mcp.example.com/mcp' });
    expect(set.MCP_AUTHORIZATION_SERVER).toBe('https://auth.example.com');
    expect(set.resourceUrl?.href).toBe('https://mcp.example.com/mcp');
    expect(loadMcpServerConfig({}).resourceUrl).toBeUndefined();
    expect(() => loadMcpServerConfig({ MCP_AUTHORIZATION_SERVER: 'auth.example.com' })).toThrow(/MCP_AUTHORIZATION_SERVER/);
    expect(() => loadMcpServerConfig({ MCP_RESOURCE_URL: 'ftp://mcp.example.com/mcp' })).toThrow(/MCP_RESOURCE_URL/);
  });

  it('the stdio principal: MCP_STDIO_SUBJECT, MCP_STDIO_TENANT, and comma-separated MCP_STDIO_SCOPES and MCP_STDIO_ROLES', () => {
    const config = loadMcpServerConfig({ MCP_STDIO_SUBJECT: 'ops', MCP_STDIO_SCOPES: 'tickets:read, tickets:write', MCP_STDIO_ROLES: 'agent' });
    expect([config.MCP_STDIO_SUBJECT, config.MCP_STDIO_TENANT, config.MCP_STDIO_SCOPES, config.MCP_STDIO_ROLES]).toEqual([
      'ops',
      undefined,
      ['tickets:read', 'tickets:write'],
      ['agent'],
    ]);
    expect(loadMcpServerConfig({}).MCP_STDIO_SCOPES).toEqual([]);
  });

  it('MCP_APPROVAL_SECRET: unset means elicitation approval; set, at least 32 characters', () => {
    expect(loadMcpServerConfig({}).MCP_APPROVAL_SECRET).toBeUndefined();
    expect(loadMcpServerConfig({ MCP_APPROVAL_SECRET: 's'.repeat(32) }).MCP_APPROVAL_SECRET).toBe('s'.repeat(32));
    expect(() => loadMcpServerConfig({ MCP_APPROVAL_SECRET: 'short' })).toThrow(/MCP_APPROVAL_SECRET: must be at least 32 characters/);
  });

  it('MCP_ROUTING_HEADERS: required unless set to optional', () => {
    expect(loadMcpServerConfig({}).MCP_ROUTING_HEADERS).toBe('required');
    expect(loadMcpServerConfig({ MCP_ROUTING_HEADERS: 'optional' }).MCP_ROUTING_HEADERS).toBe('optional');
    expect(() => loadMcpServerConfig({ MCP_ROUTING_HEADERS: 'off' })).toThrow(/MCP_ROUTING_HEADERS/);
  });

  it('MCP_APPROVAL_CROSS_TENANT_ROLES: none unless listed, comma-separated', () => {
    expect(loadMcpServerConfig({}).MCP_APPROVAL_CROSS_TENANT_ROLES).toEqual([]);
    expect(loadMcpServerConfig({ MCP_APPROVAL_CROSS_TENANT_ROLES: 'platform-approver, support-lead' }).MCP_APPROVAL_CROSS_TENANT_ROLES).toEqual([
      'platform-approver',
      'support-lead',
    ]);
  });
});
