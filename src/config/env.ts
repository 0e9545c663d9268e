import { z } from 'zod';

const hostPort = z
  .string()
  .refine(
    (value) => /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.test(value) && Number(value.slice(value.lastIndexOf(':') + 1)) <= 65535,
    'expected host:port with a port from 0 to 65535, e.g. 0.0.0.0:50051',
  );

const redisUrl = z
  .string()
  .refine((value) => URL.canParse(value) && /^rediss?:$/.test(new URL(value).protocol), 'expected redis://host:port or rediss://host:port');

/** Every environment variable the service reads; the README lists the same with defaults. */
export const envSchema = z.object({
  QUOTA_GRPC_ADDR: hostPort.default('0.0.0.0:50051'),
  QUOTA_REDIS_URL: redisUrl.optional(),
  QUOTA_REDIS_CLUSTER: z
    .undefined({ error: 'Redis Cluster is not supported in this release; set QUOTA_REDIS_URL to a single node' })
    .optional(),
  QUOTA_POLICIES: z.string().min(1).default('config/policies.yaml'),
  QUOTA_METRICS_ADDR: hostPort.optional(),
  QUOTA_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  QUOTA_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  // Store failure handling (src/store/failure.ts, docs/operations.md).
  QUOTA_STORE_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(50),
  QUOTA_BREAKER_FAILURES: z.coerce.number().int().min(1).max(1_000).default(5),
  QUOTA_BREAKER_HALF_OPEN_MS: z.coerce.number().int().min(10).max(600_000).default(1_000),
  // Authenticated callers (docs/operations.md): TLS/mTLS on the gRPC port, bearer tokens per caller.
  QUOTA_TLS_CERT: z.string().min(1).optional(),
  QUOTA_TLS_KEY: z.string().min(1).optional(),
  QUOTA_TLS_CLIENT_CA: z.string().min(1).optional(),
  QUOTA_AUTH_TOKENS: z.string().min(1).optional(),
});

export type ServiceConfig = Readonly<z.infer<typeof envSchema>> & {
  /** QUOTA_* variables the service does not know: likely typos, or Kubernetes service links. */
  readonly unknownVariables: readonly string[];
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Reads the QUOTA_* variables once; a bad one fails fast with its name in the message. */
export function loadConfig(env: NodeJS.ProcessEnv): ServiceConfig {
  const own = Object.fromEntries(
    Object.entries(env).filter(([name, value]) => name.startsWith('QUOTA_') && value !== undefined && value !== ''),
  );
  const parsed = envSchema.safeParse(own);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const unknownVariables = Object.keys(own).filter((name) => !Object.hasOwn(envSchema.shape, name));
  return Object.freeze({ ...parsed.data, unknownVariables });
}
