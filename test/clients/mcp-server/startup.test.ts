import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type CallToolResult, Client } from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { VirtualClock } from '@quota-service/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadPolicyFile } from '../../../src/config/policies.js';
import { MemoryStore } from '../../../src/store/memory.js';
import { own } from '../../support/owned-child.js';
import { shippedPolicies, startTestService, type TestService } from '../../support/quota-service.js';
import { T0 } from '../../support/store-fixtures.js';
import { TS_NODE_ARGS } from '../../support/ts-node-args.js';

// What an MCP server author meets when a host starts the reference server (stdio, in
// whatever directory the host chooses): where audit records go, what a broken audit
// file logs, and a tool whose quota policy the quota service does not have.

const MAIN = resolve('clients/mcp-server/main.ts');
// The host's working directory is not the repository: the tsx loader is named by its file.
const TS_ARGS = TS_NODE_ARGS.map((arg) => (arg === 'tsx' ? pathToFileURL(resolve('node_modules/tsx/dist/loader.mjs')).href : arg));

let mcpService: TestService;
let orderService: TestService;
let dir: string;

beforeAll(async () => {
  mcpService = await startTestService(new MemoryStore(new VirtualClock(T0)), await loadPolicyFile('config/mcp-policies.yaml'));
  // The order API's policies: none of the tools' policies are there.
  orderService = await startTestService(new MemoryStore(new VirtualClock(T0)), await shippedPolicies());
  dir = await mkdtemp(join(tmpdir(), 'mcp-startup-'));
});
afterAll(async () => {
  await mcpService?.stop();
  await orderService?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const stdioEnv = (quotaPort: number, extra: Record<string, string> = {}) => ({
  ...getDefaultEnvironment(),
  MCP_TRANSPORT: 'stdio',
  MCP_QUOTA_ADDR: `127.0.0.1:${quotaPort}`,
  MCP_QUOTA_TIMEOUT_MS: '5000',
  MCP_STDIO_SUBJECT: 'local-operator',
  MCP_STDIO_SCOPES: 'tickets:read,tickets:write,customers:read',
  MCP_STDIO_ROLES: 'agent',
  ...extra,
});

async function connect(cwd: string, env: Record<string, string>) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [...TS_ARGS, MAIN], env, cwd, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => (stderr += String(chunk)));
  const client = new Client({ name: 'startup-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

/** Starts the server with nothing on the other end of stdio and waits for it to exit on its own. */
async function runToExit(cwd: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...TS_ARGS, MAIN], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const owned = own(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code = await new Promise<number | null>((done) => child.once('exit', (exitCode) => done(exitCode)));
  clearTimeout(timer);
  await owned.exited;
  return { code, stderr };
}

const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');

describe('the audit trail of the reference MCP server', () => {
  it('without MCP_AUDIT_FILE, records go to stderr as JSON lines: nothing is written where the host started the server', async () => {
    const hostCwd = join(dir, 'host-cwd');
    await mkdir(hostCwd);
    const { client, stderr } = await connect(hostCwd, stdioEnv(mcpService.server.port));
    try {
      const created = (await client.callTool({ name: 'create_ticket', arguments: { title: 'disk full' } })) as CallToolResult;
      expect(created.isError).toBeFalsy();
      const records = lines(stderr())
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { tool?: string; principal?: { subject: string } })
        .filter((record) => record.tool === 'create_ticket');
      expect(records, stderr()).toHaveLength(1);
      expect(records[0]?.principal?.subject).toBe('local-operator');
    } finally {
      await client.close();
    }
    expect(await readdir(hostCwd)).toEqual([]);
  });

  it('an MCP_AUDIT_FILE that cannot be written stops the start with one line naming it', async () => {
    const { code, stderr } = await runToExit(dir, stdioEnv(mcpService.server.port, { MCP_AUDIT_FILE: dir }));
    expect(code).toBe(1);
    expect(stderr).toMatch(new RegExp(`MCP_AUDIT_FILE: cannot write ${dir}: EISDIR`));
    expect(stderr).not.toMatch(/^\s+at /m);
  });

  it('an audit file that stops being writable while serving logs one line, not a stack per call; and one when it works again', async () => {
    const file = join(dir, 'audit.jsonl');
    const { client, stderr } = await connect(dir, stdioEnv(mcpService.server.port, { MCP_AUDIT_FILE: file }));
    try {
      // Serving (the start checked the file), and the first record written.
      expect(((await client.callTool({ name: 'create_ticket', arguments: { title: 'first' } })) as CallToolResult).isError).toBeFalsy();
      // The file is replaced by a directory (a wrong volume mount, a rotation gone wrong).
      await rm(file);
      await mkdir(file);
      for (let i = 0; i < 3; i++) {
        const result = (await client.callTool({ name: 'create_ticket', arguments: { title: `t${i}` } }).catch((e) => {
          throw new Error(`${e}\n${stderr()}`);
        })) as CallToolResult;
        expect(result.isError, JSON.stringify(result)).toBeFalsy();
      }
      // The log line comes on stderr, a pipe of its own: it can reach the test after the answer does.
      const failures = await vi.waitFor(
        () => {
          const found = lines(stderr()).filter((line) => /audit record/.test(line));
          expect(found, stderr()).toHaveLength(1);
          return found;
        },
        { timeout: 10_000 },
      );
      expect(failures[0]).toContain(`audit records cannot be written to ${file}: EISDIR`);
      expect(stderr()).not.toMatch(/"stack"|^\s+at /m);

      await rm(file, { recursive: true });
      await client.callTool({ name: 'create_ticket', arguments: { title: 'after' } });
      await vi.waitFor(() => expect(lines(stderr()).filter((line) => /audit records are written again/.test(line))).toHaveLength(1), { timeout: 10_000 });
    } finally {
      await client.close();
    }
  });
});

describe('the quota policies of the guarded tools', () => {
  it('a tool whose policy the quota service does not have stops the start, naming each tool and policy', async () => {
    const { code, stderr } = await runToExit(dir, stdioEnv(orderService.server.port));
    expect(code).toBe(1);
    for (const [tool, policy] of [
      ['create_ticket', 'mcp-create-ticket'],
      ['bulk_update_tickets', 'mcp-bulk-tickets'],
      ['delete_customer', 'mcp-sensitive'],
    ]) {
      expect(stderr).toContain(`tool ${tool}: policy ${policy}`);
    }
    expect(stderr).not.toMatch(/^\s+at /m);
  });

  it('with every policy there, the server starts and serves', async () => {
    const { client } = await connect(dir, stdioEnv(mcpService.server.port));
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('create_ticket');
    } finally {
      await client.close();
    }
  });
});
