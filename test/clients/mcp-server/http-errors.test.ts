import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevClients } from '../../../clients/mcp-server/dev-issuer/dev-clients.js';
import { startDevIssuer, type RunningDevIssuer } from '../../../clients/mcp-server/dev-issuer/dev-issuer.js';
import { closedPort } from '../../support/closed-port.js';
import { startMcpServerProcess, type McpServerProcess } from '../../support/mcp-server-process.js';
import { ALICE, toolsCall } from './http-harness.js';

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

/** Resolves once the process logged `pattern` `times` times after offset `from` of its stderr (or after 10 s, to let the test fail). */
async function loggedTimes(server: McpServerProcess, from: number, pattern: RegExp, times: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((server.stderr().slice(from).match(pattern) ?? []).length < times && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

let issuer: RunningDevIssuer;
beforeAll(async () => {
  issuer = await startDevIssuer({
    host: '127.0.0.1',
    port: 0,
    clients: await loadDevClients('config/mcp-dev-clients.yaml'),
    logger: pino({ level: 'silent' }),
  });
});
afterAll(async () => {
  await issuer?.close();
});

/** alice's bearer header, for the server on `port` (the token's audience is its resource URL). */
async function aliceFor(port: number): Promise<Record<string, string>> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', resource: `http://localhost:${port}/mcp` });
  const basic = Buffer.from(`${ALICE.id}:${ALICE.secret}`).toString('base64');
  const response = await fetch(`${issuer.issuer}/token`, { method: 'POST', headers: { authorization: `Basic ${basic}` }, body: form });
  return { authorization: `Bearer ${((await response.json()) as { access_token: string }).access_token}` };
}

describe.each(['development', 'production'])('reference MCP server error answers with NODE_ENV=%s', (nodeEnv) => {
  let server: McpServerProcess;
  let dir: string;
  let alice: Record<string, string>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-errors-'));
    server = await startMcpServerProcess({
      NODE_ENV: nodeEnv,
      MCP_QUOTA_ADDR: `127.0.0.1:${await closedPort()}`,
      MCP_AUTHORIZATION_SERVER: issuer.issuer,
      MCP_AUDIT_FILE: join(dir, 'audit.jsonl'),
    });
    alice = await aliceFor(server.port);
  });
  afterAll(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('malformed JSON: 400 with the JSON-RPC parse error (after authentication: 401 without a token)', async () => {
    const response = await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...alice }, '{"jsonrpc": "2.0", "method": ');
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toEqual({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
    expectPlainJsonError(response);
    const anonymous = await raw(server.port, 'POST', '/mcp', JSON_HEADERS, '{"jsonrpc": "2.0", "method": ');
    expect(anonymous.status).toBe(401);
    expect(JSON.parse(anonymous.body)).toEqual({ error: 'invalid_token', error_description: 'Missing Authorization header' });
    expectPlainJsonError(anonymous);
    // The server is unharmed: a well-formed call is served (refused as a tool result: there is no quota service here).
    const call = toolsCall(1, 'bulk_update_tickets', { ticketIds: ['T-9'], status: 'closed' });
    const good = await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...call.headers, ...alice }, JSON.stringify(call.body));
    expect(good.status).toBe(200);
    expect(JSON.parse(good.body)).toMatchObject({ id: 1, result: { isError: true, _meta: { 'dev.quota-service/refusal': { reason: 'quota_unavailable' } } } });
  });

  it('a body nested 5,000 levels deep: 400 with a JSON-RPC error, no stack in the answer or in the log; 64 levels are served', async () => {
    const deepArguments = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
    /** A create_ticket call whose arguments carry `levels` nested arrays: the body nests 3 + levels deep. */
    const deepCall = (id: number, levels: number) => {
      const call = toolsCall(id, 'create_ticket', { title: 'x' });
      return { headers: call.headers, body: JSON.stringify(call.body).replace('"title":"x"', `"title":"x","deep":${deepArguments(levels)}`) };
    };
    const logBefore = server.stderr().length;
    const refusals = [
      { id: 21, response: await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...deepCall(21, 5_000).headers, ...alice }, deepCall(21, 5_000).body) },
      { id: null, response: await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...alice }, deepArguments(5_000)) },
      { id: null, response: await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...alice }, `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`) },
      { id: 22, response: await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...deepCall(22, 62).headers, ...alice }, deepCall(22, 62).body) },
    ];
    for (const { id, response } of refusals) {
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body)).toEqual({
        jsonrpc: '2.0',
        error: { code: -32600, message: 'Bad Request: the body nests arrays and objects deeper than 64 levels' },
        id,
      });
      expectPlainJsonError(response);
    }
    // The log is another pipe than the answers: wait until its four lines have come.
    await loggedTimes(server, logBefore, /body nested too deep/g, 4);
    const log = server.stderr().slice(logBefore);
    expect(log).not.toMatch(/RangeError|Maximum call stack|"stack"|\bat \S+ \(/);
    expect(log.match(/body nested too deep/g)).toHaveLength(4);
    // 64 levels (61 in the arguments) reach the tool: refused there only because this server has no quota service.
    const deepest = deepCall(23, 61);
    const served = await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...deepest.headers, ...alice }, deepest.body);
    expect(served.status).toBe(200);
    expect(JSON.parse(served.body)).toMatchObject({
      id: 23,
      result: { isError: true, _meta: { 'dev.quota-service/refusal': { reason: 'quota_unavailable' } } },
    });
  });

  it('a body over 100 KB: 413 with a JSON-RPC error naming the limit', async () => {
    const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(200_000) } });
    const response = await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...alice }, big);
    expect(response.status).toBe(413);
    expect(JSON.parse(response.body)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32000, message: 'Payload Too Large: Request body must not exceed 102400 bytes' },
      id: null,
    });
    expectPlainJsonError(response);
  });

  it('a charset the JSON parser cannot read: 415 as JSON', async () => {
    const response = await raw(server.port, 'POST', '/mcp', { ...JSON_HEADERS, ...alice, 'content-type': 'application/json; charset=latin1' }, '{}');
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
