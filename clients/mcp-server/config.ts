import { z } from 'zod';
import { DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, DEFAULT_SESSION_IDLE_TIMEOUT_MS } from './sessions.js';

const list = z.string().transform((value) =>
  value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== ''),
);

/** Browser origins (`scheme://host[:port]`), written as the Origin header carries them. */
const origins = list.pipe(z.array(z.url({ protocol: /^https?$/ }).transform((value) => new URL(value).origin)));

/**
 * Every environment variable the reference MCP server reads (clients/mcp/README.md
 * lists them). Only MCP_* names: the quota service's QUOTA_* variables may be set in
 * the same shell, and the service warns about QUOTA_* names it does not know.
 */
const schema = z.object({
  MCP_TRANSPORT: z.enum(['stdio', 'http']).default('stdio'),
  MCP_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  MCP_HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(3333),
  MCP_RESOURCE_URL: z.url().optional(),
  MCP_ALLOWED_HOSTS: list.optional(),
  MCP_ALLOWED_ORIGINS: origins.optional(),
  MCP_AUTHORIZATION_SERVERS: list.default([]),
  MCP_SESSION_IDLE_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(86_400_000).default(DEFAULT_SESSION_IDLE_TIMEOUT_MS),
  MCP_MAX_SESSIONS_PER_PRINCIPAL: z.coerce.number().int().min(1).max(10_000).default(DEFAULT_MAX_SESSIONS_PER_PRINCIPAL),
  MCP_DEV_TOKENS: z.string().min(1).default('config/mcp-dev-tokens.yaml'),
  MCP_APPROVAL_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  MCP_AUDIT_FILE: z.string().min(1).default('mcp-audit.jsonl'),
  MCP_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  MCP_QUOTA_ADDR: z.string().min(1).default('127.0.0.1:50051'),
  MCP_QUOTA_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(500),
});

export type McpServerConfig = Readonly<
  Omit<z.infer<typeof schema>, 'MCP_RESOURCE_URL' | 'MCP_ALLOWED_HOSTS' | 'MCP_ALLOWED_ORIGINS'> & {
    resourceUrl: URL;
    allowedHosts: string[];
    /** Unset: the server's own origin only. */
    allowedOrigins?: string[];
  }
>;

/** The names loadMcpServerConfig reads, and no other. */
export const MCP_SERVER_ENV_NAMES: readonly string[] = Object.keys(schema.shape);

/** Parses the environment once, reading only its own names; a bad variable fails with its name. */
export function loadMcpServerConfig(env: NodeJS.ProcessEnv): McpServerConfig {
  const own = Object.fromEntries(MCP_SERVER_ENV_NAMES.map((name) => [name, env[name]]).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = schema.safeParse(own);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  const { MCP_RESOURCE_URL, MCP_ALLOWED_HOSTS, MCP_ALLOWED_ORIGINS, ...rest } = parsed.data;
  const resourceUrl = new URL(MCP_RESOURCE_URL ?? `http://localhost:${rest.MCP_HTTP_PORT}/mcp`);
  // Default: loopback names plus the public name clients use to reach the server.
  const allowedHosts = MCP_ALLOWED_HOSTS ?? [...new Set(['localhost', '127.0.0.1', '[::1]', resourceUrl.hostname])];
  return Object.freeze({ ...rest, resourceUrl, allowedHosts, ...(MCP_ALLOWED_ORIGINS === undefined ? {} : { allowedOrigins: MCP_ALLOWED_ORIGINS }) });
}
