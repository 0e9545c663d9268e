// The example processes on a listen address in use: one line naming the
// variable, the address and the cause, exit 1 (as the quota service does).
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevIssuerProcess, type McpProcess } from '../support/mcp-server-process.js';
import { own } from '../support/owned-child.js';
import { TS_NODE_ARGS } from '../support/ts-node-args.js';

let taken: Server;
let port: number;
// The MCP server asks its authorization server for metadata before it listens.
let issuer: McpProcess;
beforeAll(async () => {
  issuer = await startDevIssuerProcess();
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  port = (taken.address() as { port: number }).port;
});
afterAll(async () => {
  await issuer.stop();
  await new Promise<void>((resolve) => taken.close(() => resolve()));
});

/** Runs an example's main to its exit; its exit code and stderr. */
async function run(main: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, main], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  own(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stderr };
}

describe('an example on a listen address in use', () => {
  it('the order API names ORDER_API_ADDR', async () => {
    const { code, stderr } = await run('clients/order-api/main.ts', { ORDER_API_ADDR: `127.0.0.1:${port}` });
    expect(code).toBe(1);
    expect(stderr).toBe(`order-api: ORDER_API_ADDR: cannot listen on 127.0.0.1:${port}: address in use (another process listens there)\n`);
  });

  it('the MCP server names MCP_HTTP_HOST and MCP_HTTP_PORT', async () => {
    const { code, stderr } = await run('clients/mcp-server/main.ts', {
      MCP_TRANSPORT: 'http',
      MCP_HTTP_HOST: '127.0.0.1',
      MCP_HTTP_PORT: String(port),
      MCP_AUTHORIZATION_SERVER: `http://localhost:${issuer.port}`,
    });
    expect(code).toBe(1);
    // Its log (JSON lines) shares stderr: the last line is the error.
    expect(stderr.trimEnd().split('\n').at(-1)).toBe(
      `mcp-server: MCP_HTTP_HOST, MCP_HTTP_PORT: cannot listen on 127.0.0.1:${port}: address in use (another process listens there)`,
    );
  });
});
