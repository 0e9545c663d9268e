import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { own } from '../../support/owned-child.js';

// scripts/run-mcp.sh (`make run-mcp`) as a developer runs it: the development issuer and
// the reference MCP server. A port another process holds must end the run at once, and
// the issuer counts as ready only when the process the script started says so.

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((done) => server.close(done))));
});

/** Another process's HTTP server on a loopback port, answering like an authorization server would. */
async function occupiedPort(): Promise<number> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ issuer: 'http://elsewhere.invalid', token_endpoint: 'http://elsewhere.invalid/token' }));
  });
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return (server.address() as AddressInfo).port;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

function runScript(env: Record<string, string>) {
  const child = spawn('bash', ['scripts/run-mcp.sh'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, MCP_QUOTA_ADDR: '127.0.0.1:1', MCP_QUOTA_TIMEOUT_MS: '200', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const owned = own(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout.resume();
  const exit = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { child, owned, exit, stderr: () => stderr };
}

describe('scripts/run-mcp.sh', () => {
  it("ends at once when the issuer's port is taken, even by a process that answers like an issuer", async () => {
    const issuerPort = await occupiedPort();
    const run = runScript({ MCP_DEV_ISSUER_PORT: String(issuerPort), MCP_HTTP_PORT: String(await freePort()) });
    try {
      expect(await run.exit, run.stderr()).toBe(1);
      expect(run.stderr()).toContain(`run-mcp: port ${issuerPort} (the development issuer) is already in use by another process`);
      expect(run.stderr()).not.toContain('development issuer on');
    } finally {
      await run.owned.stop(5_000);
    }
  }, 60_000);

  it("ends at once when the MCP server's port is taken", async () => {
    const mcpPort = await occupiedPort();
    const run = runScript({ MCP_DEV_ISSUER_PORT: String(await freePort()), MCP_HTTP_PORT: String(mcpPort) });
    try {
      expect(await run.exit, run.stderr()).toBe(1);
      expect(run.stderr()).toContain(`run-mcp: port ${mcpPort} (the MCP server) is already in use by another process`);
    } finally {
      await run.owned.stop(5_000);
    }
  }, 60_000);

  it('on free ports: the issuer it started is ready, then the server; SIGTERM stops both', async () => {
    const issuerPort = await freePort();
    const mcpPort = await freePort();
    const run = runScript({ MCP_DEV_ISSUER_PORT: String(issuerPort), MCP_HTTP_PORT: String(mcpPort) });
    try {
      await new Promise<void>((done, fail) => {
        const serverReady = (line: string) => line.includes('"name":"mcp-server"') && line.includes('"msg":"ready"');
        const check = () => {
          if (run.stderr().split('\n').some(serverReady)) done();
        };
        run.child.stderr.on('data', check);
        void run.exit.then((code) => fail(new Error(`exited ${code}:\n${run.stderr()}`)));
      });
      expect(run.stderr()).toContain(`run-mcp: development issuer on http://localhost:${issuerPort}`);
      expect((await fetch(`http://127.0.0.1:${issuerPort}/.well-known/oauth-authorization-server`)).status).toBe(200);
      run.child.kill('SIGTERM');
      await run.exit;
      // Both children are gone with it: their ports refuse connections.
      for (const port of [issuerPort, mcpPort]) {
        await expect(fetch(`http://127.0.0.1:${port}/`)).rejects.toThrow();
      }
    } finally {
      await run.owned.stop(5_000);
    }
  }, 60_000);
});
