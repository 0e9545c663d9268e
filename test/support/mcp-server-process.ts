import { spawn } from 'node:child_process';
import { own } from './owned-child.js';
import { TS_NODE_ARGS } from './ts-node-args.js';

/** A process of the reference MCP setup (`make run-mcp` starts both kinds), owned by the test. */
export interface McpProcess {
  /** The HTTP port it listens on (it was started with port 0). */
  readonly port: number;
  /** The fields of its `ready` log line. */
  readonly ready: Record<string, unknown>;
  /** Everything it wrote to stderr (its log) so far. */
  stderr(): string;
  stop(): Promise<void>;
}

/** The reference MCP server's process. */
export type McpServerProcess = McpProcess;

/**
 * Spawns `script` through tsx and resolves once it logged `ready` (with its port).
 * Only PATH and `env` reach the child, so NODE_ENV is whatever the test passes.
 * Rejects with the child's stderr if it exits first.
 */
async function startReadyProcess(script: string, env: Record<string, string>): Promise<McpProcess> {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, script], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const owned = own(child);
  let stderr = '';
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      for (const line of stderr.split('\n')) {
        if (!line.includes('"msg":"ready"')) continue;
        resolve(JSON.parse(line) as Record<string, unknown>);
        return;
      }
    });
    void owned.exited.then(() => reject(new Error(`${script} exited before it was ready:\n${stderr}`)));
  });
  return { port: Number(ready['port']), ready, stderr: () => stderr, stop: () => owned.stop(5_000) };
}

/** clients/mcp-server/main.ts with MCP_TRANSPORT=http on a free loopback port (unless `env` says otherwise). */
export function startMcpServerProcess(env: Record<string, string>): Promise<McpServerProcess> {
  return startReadyProcess('clients/mcp-server/main.ts', { MCP_TRANSPORT: 'http', MCP_HTTP_HOST: '127.0.0.1', MCP_HTTP_PORT: '0', ...env });
}

/** The development authorization server (clients/mcp-server/dev-issuer/main.ts) on a free loopback port. */
export function startDevIssuerProcess(env: Record<string, string> = {}): Promise<McpProcess> {
  return startReadyProcess('clients/mcp-server/dev-issuer/main.ts', { MCP_DEV_ISSUER_HOST: '127.0.0.1', MCP_DEV_ISSUER_PORT: '0', ...env });
}
