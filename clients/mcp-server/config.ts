import { z } from 'zod';

const list = z.string().transform((value) =>
  value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== ''),
);

/** Browser origins (`scheme://host[:port]`), written as the Origin header carries them. */
const origins = list.pipe(z.array(z.url({ protocol: /^https?$/ }).transform((value) => new URL(value).origin)));
const names = list.pipe(z.array(z.string().min(1).max(256)));

/**
 * Every environment variable the reference MCP server reads (clients/mcp/README.md
 * lists them). Only MCP_* names: the quota service's QUOTA_* variables may be set in
 * the same shell, and the service warns about QUOTA_* names it does not know.
 */
const schema = z.object({
  MCP_TRANSPORT: z.enum(['stdio', 'http']).default('stdio'),
  MCP_HTTP_HOST: z.string().min(1).default('127.0.0.1'),
  MCP_HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(3333),
  MCP_RESOURCE_URL: z.url({ protocol: /^https?$/ }).optional(),
  MCP_ALLOWED_HOSTS: list.optional(),
  MCP_ALLOWED_ORIGINS: origins.optional(),
  MCP_AUTHORIZATION_SERVER: z.url({ protocol: /^https?$/ }).optional(),
  MCP_STDIO_SUBJECT: z.string().min(1).max(256).optional(),
  MCP_STDIO_TENANT: z.string().min(1).max(256).optional(),
  MCP_STDIO_SCOPES: names.default([]),
  MCP_STDIO_ROLES: names.default([]),
  MCP_APPROVAL_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  MCP_APPROVAL_CROSS_TENANT_ROLES: names.default([]),
  MCP_ROUTING_HEADERS: z.enum(['required', 'optional']).default('required'),
  MCP_AUDIT_FILE: z.string().min(1).optional(),
  MCP_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  MCP_QUOTA_ADDR: z.string().min(1).default('127.0.0.1:50051'),
  MCP_QUOTA_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(500),
});

type Parsed = z.infer<typeof schema>;

export type McpServerConfig = Readonly<
  Omit<Parsed, 'MCP_RESOURCE_URL' | 'MCP_ALLOWED_HOSTS' | 'MCP_ALLOWED_ORIGINS'> & {
    /** Unset: `http://localhost:<bound port>/mcp`. */
    resourceUrl?: URL;
    /** Unset: loopback names and the resource URL's host. */
    allowedHosts?: string[];
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
  return Object.freeze({
    ...rest,
    ...(MCP_RESOURCE_URL === undefined ? {} : { resourceUrl: new URL(MCP_RESOURCE_URL) }),
    ...(MCP_ALLOWED_HOSTS === undefined ? {} : { allowedHosts: MCP_ALLOWED_HOSTS }),
    ...(MCP_ALLOWED_ORIGINS === undefined ? {} : { allowedOrigins: MCP_ALLOWED_ORIGINS }),
  });
}
