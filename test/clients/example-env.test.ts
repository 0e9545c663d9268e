import { describe, expect, it } from 'vitest';
import { loadMcpServerConfig, MCP_SERVER_ENV_NAMES } from '../../clients/mcp-server/config.js';
import { loadOrderApiConfig } from '../../clients/order-api/config.js';

// The examples run in the same shell as the quota service, which warns about QUOTA_*
// variables it does not know: the examples read their own prefix and nothing else.

/** The quota service's own variables, and the names the examples once used for the service address. */
const QUOTA_ENV = {
  QUOTA_GRPC_ADDR: '10.9.9.9:1',
  QUOTA_SERVICE_ADDR: '10.9.9.9:2',
  QUOTA_TIMEOUT_MS: '7',
  QUOTA_LOG_LEVEL: 'trace',
  DEMO_QUOTA_ADDR: '10.9.9.9:3',
};

/** An environment that records every name read from it and fails if it is enumerated. */
function recordingEnv(values: Record<string, string>): { env: NodeJS.ProcessEnv; read: Set<string> } {
  const read = new Set<string>();
  const env = new Proxy(values, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return Reflect.get(target, name);
    },
    has(target, name) {
      if (typeof name === 'string') read.add(name);
      return Reflect.has(target, name);
    },
    ownKeys() {
      throw new Error('the environment was enumerated: every name could be read');
    },
  });
  return { env, read };
}

describe.each([
  ['order API', 'ORDER_API_', (env: NodeJS.ProcessEnv) => loadOrderApiConfig(env).quotaAddress, 'ORDER_API_QUOTA_ADDR'],
  ['MCP server', 'MCP_', (env: NodeJS.ProcessEnv) => loadMcpServerConfig(env).MCP_QUOTA_ADDR, 'MCP_QUOTA_ADDR'],
] as const)('the %s configuration', (_name, prefix, quotaAddress, addressName) => {
  it(`reads only ${prefix}* names, none of the quota service's QUOTA_*`, () => {
    const { env, read } = recordingEnv({ ...QUOTA_ENV });
    quotaAddress(env);
    expect(read.size).toBeGreaterThan(5);
    for (const name of read) expect(name.startsWith(prefix), name).toBe(true);
  });

  it(`takes the quota service address from ${addressName} only`, () => {
    expect(quotaAddress({ ...QUOTA_ENV })).toBe('127.0.0.1:50051');
    expect(quotaAddress({ ...QUOTA_ENV, [addressName]: 'quota.internal:50051' })).toBe('quota.internal:50051');
  });
});

describe('the MCP server configuration', () => {
  it('lists MCP_* names only; MCP_QUOTA_TIMEOUT_MS is the decision budget, QUOTA_TIMEOUT_MS is ignored', () => {
    for (const name of MCP_SERVER_ENV_NAMES) expect(name.startsWith('MCP_'), name).toBe(true);
    expect(loadMcpServerConfig({ ...QUOTA_ENV }).MCP_QUOTA_TIMEOUT_MS).toBe(500);
    expect(loadMcpServerConfig({ MCP_QUOTA_TIMEOUT_MS: '750' }).MCP_QUOTA_TIMEOUT_MS).toBe(750);
    expect(() => loadMcpServerConfig({ MCP_QUOTA_TIMEOUT_MS: '0' })).toThrow(/MCP_QUOTA_TIMEOUT_MS/);
  });
});
