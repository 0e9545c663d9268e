import { z } from 'zod';

const schema = z.object({
  MCP_DEV_ISSUER_HOST: z.string().min(1).default('127.0.0.1'),
  MCP_DEV_ISSUER_PORT: z.coerce.number().int().min(0).max(65535).default(3334),
  MCP_DEV_ISSUER_URL: z.url({ protocol: /^https?$/ }).optional(),
  MCP_DEV_ISSUER_CLIENTS: z.string().min(1).default('config/mcp-dev-clients.yaml'),
  MCP_DEV_ISSUER_TOKEN_TTL_S: z.coerce.number().int().min(1).max(86_400).default(3600),
  MCP_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type DevIssuerConfig = Readonly<z.infer<typeof schema>>;

/** The names loadDevIssuerConfig reads, and no other. */
export const DEV_ISSUER_ENV_NAMES: readonly string[] = Object.keys(schema.shape);

/** Parses the development issuer's environment once; a bad variable fails with its name. */
export function loadDevIssuerConfig(env: NodeJS.ProcessEnv): DevIssuerConfig {
  const own = Object.fromEntries(DEV_ISSUER_ENV_NAMES.map((name) => [name, env[name]]).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = schema.safeParse(own);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  return Object.freeze(parsed.data);
}
