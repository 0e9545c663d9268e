import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedPort } from '../../support/closed-port.js';
import { startMcpServerProcess, type McpServerProcess } from '../../support/mcp-server-process.js';

// The reference server's error answers, as a client on the network sees them: a
// real process started from main.ts, under both NODE_ENV values Express treats
// differently (its own error page shows a stack unless NODE_ENV=production).

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function raw(port: number, method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { host: `localhost:${port}`, ...headers } }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** An error answer a stranger may see: JSON, and nothing about the server's insides. */
function expectPlainJsonError(response: RawResponse) {
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  expect(response.body).not.toMatch(/<html|<pre>|\bat \S+ \(|node_modules|node:internal/i);
  expect(response.body).not.toContain(process.cwd());
  expect(response.body).not.toContain('/clients/');
  expect(response.headers['x-powered-by']).toBeUndefined();
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const ALICE = { authorization: 'Bearer dev-alice-agent-token' };

describe.each(['development', 'production'])('reference MCP server error answers with NODE_ENV=%s', (nodeEnv) => {
  let server: McpServerProcess;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-errors-'));
    server = await startMcpServerProcess({
      NODE_ENV: nodeEnv,
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_DEV_TOKENS: 'config/mcp-dev-tokens.yaml',
      // The dev tokens' audience.
      MCP_RESOURCE_URL: 'http://localhost:3333/mcp',
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
    });
  });
  afterAll(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('malformed JSON: 400 with the JSON-RPC parse error, with or without a token', async () => {
    for (const headers of [JSON_HEADERS, { ...JSON_HEADERS, ...ALICE }]) {
      const response = await raw(server.port, 'POST', '/mcp', headers, '{"jsonrpc": "2.0", "method": ');
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body)).toEqual({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
      expectPlainJsonError(response);
    }
    // The server is unharmed: a well-formed initialize opens a session.
    const good = await raw(
      server.port,
      'POST',
      '/mcp',
      { ...JSON_HEADERS, ...ALICE },
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    );
    expect(good.status).toBe(200);
    expect(good.headers['mcp-session-id']).toEqual(expect.any(String));
  });

  it('a body over 100 KB: 413 with a JSON-RPC error naming the limit', async () => {
    const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(200_000) } });
    for (const headers of [JSON_HEADERS, { ...JSON_HEADERS, ...ALICE }]) {
      const response = await raw(server.port, 'POST', '/mcp', headers, big);
      expect(response.status).toBe(413);
      expect(JSON.parse(response.body)).toEqual({
        jsonrpc: '2.0',
        error: { code: -32000, message: 'Payload Too Large: Request body must not exceed 102400 bytes' },
        id: null,
      });
      expectPlainJsonError(response);
    }
  });

  it('a charset the JSON parser cannot read: 415 as JSON', async () => {
    const response = await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, 'content-type': 'application/json; charset=latin1' }, '{}');
    expect(response.status).toBe(415);
    expect(JSON.parse(response.body)).toEqual({ jsonrpc: '2.0', error: { code: -32000, message: 'Unsupported Media Type' }, id: null });
    expectPlainJsonError(response);
  });

  it('an unknown path: 404 as JSON', async () => {
    const response = await raw(server.port, 'GET', '/nothing-here', {});
    expect(response.status).toBe(404);
    expect(JSON.parse(response.body)).toEqual({ jsonrpc: '2.0', error: { code: -32000, message: 'Not Found' }, id: null });
    expectPlainJsonError(response);
  });
});
