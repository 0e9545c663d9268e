import { spawn } from 'node:child_process';
import { own } from './owned-child.js';
import { TS_NODE_ARGS } from './ts-node-args.js';

/** The reference MCP server as `make run-mcp` starts it (Streamable HTTP, through tsx), owned by the test. */
export interface McpServerProcess {
  /** The HTTP port it listens on (it was started with MCP_HTTP_PORT=0). */
  readonly port: number;
  /** Everything it wrote to stderr (its log) so far. */
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Spawns clients/mcp-server/main.ts with MCP_TRANSPORT=http on a free loopback
 * port and resolves once it logged `ready`. Only PATH and `env` reach the child,
 * so NODE_ENV is whatever the test passes.
 */
export async function startMcpServerProcess(env: Record<string, string>): Promise<McpServerProcess> {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, 'clients/mcp-server/main.ts'], {
    env: { PATH: process.env.PATH, MCP_TRANSPORT: 'http', MCP_HTTP_HOST: '127.0.0.1', MCP_HTTP_PORT: '0', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const owned = own(child);
  let stderr = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const ready = /"port":(\d+)[^\n]*"msg":"ready"/.exec(stderr);
      if (ready !== null) resolve(Number(ready[1]));
    });
    void owned.exited.then(() => reject(new Error(`mcp-server exited before it was ready:\n${stderr}`)));
  });
  return { port, stderr: () => stderr, stop: () => owned.stop(5_000) };
}
