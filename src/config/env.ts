import { DEFAULT_ADMISSION } from './admission-limits.js';
import { DEFAULT_CLOCK_SKEW_ALLOWANCE_MS } from './stale-requests.js';
import { z } from 'zod';

const hostPort = z
  .string()
  .refine(
    (value) => /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.test(value) && Number(value.slice(value.lastIndexOf(':') + 1)) <= 65535,
    'expected host:port with a port from 0 to 65535, e.g. 0.0.0.0:50051',
  );

const redisUrl = z.string().refine(
  // A host is required: `redis:/host:6379` parses as a URL with an empty host, which ioredis would quietly send to localhost.
  (value) => URL.canParse(value) && /^rediss?:$/.test(new URL(value).protocol) && new URL(value).hostname !== '',
  'expected redis://host:port or rediss://host:port',
);

/**
 * Redis Cluster seeds: `host:port,host:port,...`, or the same as redis:// URLs when the
 * nodes need a password (`redis://:secret@host:port`) or rediss:// for TLS. Any
 * reachable node will do; the client discovers the rest from CLUSTER SLOTS.
 */
const redisClusterSeeds = z
  .string()
  .transform((value) =>
    value
      .split(',')
      .map((seed) => seed.trim())
      .filter((seed) => seed !== ''),
  )
  .refine((seeds) => seeds.length > 0, { message: 'expected at least one seed, e.g. 10.0.0.1:6379,10.0.0.2:6379', abort: true })
  .refine((seeds) => seeds.every((seed) => hostPort.safeParse(seed).success || (redisUrl.safeParse(seed).success && new URL(seed).port !== '')), {
    message: 'expected a comma-separated list of host:port seeds (or redis://[:password@]host:port, rediss:// for TLS), e.g. 10.0.0.1:6379,10.0.0.2:6379',
    abort: true,
  })
  .refine(
    (seeds) =>
      new Set(seeds.map((seed) => (seed.includes('://') ? `${new URL(seed).protocol}${new URL(seed).username}:${new URL(seed).password}` : 'plain'))).size ===
      1,
    'all seeds must use the same form: all host:port, or all redis:// (or rediss://) URLs with the same credentials',
  );

/** A switch: true or false (also 1 or 0, yes or no). */
const flag = (byDefault: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'expected true or false' })
    .optional()
    .transform((value) => (value === undefined ? byDefault : value === 'true' || value === '1' || value === 'yes'));

/** Every environment variable the service reads; the README lists the same with defaults. */
export const envSchema = z
  .object({
    QUOTA_GRPC_ADDR: hostPort.default('0.0.0.0:50051'),
    QUOTA_REDIS_URL: redisUrl.optional(),
    QUOTA_REDIS_CLUSTER: redisClusterSeeds.optional(),
    QUOTA_POLICIES: z.string().min(1).default('config/policies.yaml'),
    QUOTA_METRICS_ADDR: hostPort.optional(),
    // A second, plaintext port with grpc.health.v1 only: Kubernetes' gRPC probes cannot speak TLS.
    QUOTA_HEALTH_ADDR: hostPort.optional(),
    QUOTA_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    QUOTA_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
    // Store failure handling (src/engine/failure.ts, docs/operations.md).
    QUOTA_STORE_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(50),
    QUOTA_BREAKER_FAILURES: z.coerce.number().int().min(1).max(1_000).default(5),
    QUOTA_BREAKER_HALF_OPEN_MS: z.coerce.number().int().min(10).max(600_000).default(1_000),
    // Load shedding (src/grpc/admission.ts, docs/operations.md): decisions pending at once, in all and per caller.
    QUOTA_MAX_PENDING_DECISIONS: z.coerce.number().int().min(1).max(10_000_000).default(DEFAULT_ADMISSION.total),
    QUOTA_MAX_PENDING_DECISIONS_PER_CALLER: z.coerce.number().int().min(1).max(10_000_000).default(DEFAULT_ADMISSION.perCaller),
    // Requests whose caller gave up (src/api/quota/stale-requests.ts, docs/operations.md): refused when later than their deadline by more than this.
    QUOTA_CLOCK_SKEW_ALLOWANCE_MS: z.coerce.number().int().min(0).max(3_600_000).default(DEFAULT_CLOCK_SKEW_ALLOWANCE_MS),
    // Authenticated callers (docs/operations.md): TLS/mTLS on the gRPC port, bearer tokens per caller.
    QUOTA_TLS_CERT: z.string().min(1).optional(),
    QUOTA_TLS_KEY: z.string().min(1).optional(),
    QUOTA_TLS_CLIENT_CA: z.string().min(1).optional(),
    QUOTA_AUTH_TOKENS: z.string().min(1).optional(),
    // TLS towards Redis (docs/operations.md): a private CA, a client certificate for tls-auth-clients.
    QUOTA_REDIS_TLS_CA: z.string().min(1).optional(),
    QUOTA_REDIS_TLS_CERT: z.string().min(1).optional(),
    QUOTA_REDIS_TLS_KEY: z.string().min(1).optional(),
    // Envoy's rate limit service (docs/envoy.md): its configuration (a file or a directory of YAML files), its
    // store budget (below Envoy's own 20 ms default timeout), the global shadow switch, the RateLimit headers.
    QUOTA_RLS_CONFIG: z.string().min(1).optional(),
    QUOTA_RLS_STORE_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(10),
    QUOTA_RLS_SHADOW_MODE: flag(false),
    QUOTA_RLS_RATELIMIT_HEADERS: flag(true),
    QUOTA_RLS_NEAR_LIMIT_RATIO: z.coerce.number().gt(0).lte(1).default(0.8),
  })
  .refine((config) => config.QUOTA_REDIS_URL === undefined || config.QUOTA_REDIS_CLUSTER === undefined, {
    path: ['QUOTA_REDIS_CLUSTER'],
    message: 'set either QUOTA_REDIS_URL (one node) or QUOTA_REDIS_CLUSTER (cluster seeds), not both',
  })
  .superRefine((config, context) => {
    const issue = (variable: string, message: string) => context.addIssue({ code: 'custom', path: [variable], message });
    if (config.QUOTA_REDIS_TLS_CERT !== undefined && config.QUOTA_REDIS_TLS_KEY === undefined)
      issue('QUOTA_REDIS_TLS_KEY', 'required with QUOTA_REDIS_TLS_CERT');
    if (config.QUOTA_REDIS_TLS_KEY !== undefined && config.QUOTA_REDIS_TLS_CERT === undefined)
      issue('QUOTA_REDIS_TLS_CERT', 'required with QUOTA_REDIS_TLS_KEY');
    // TLS is chosen by the URL scheme alone: a TLS file next to a plain redis:// address would
    // silently do nothing, and letting it switch TLS on would make redis:// mean TLS in one
    // deployment and plaintext in the next. So it is an error, naming what to change.
    const plain = plainRedis(config);
    if (plain === undefined) return;
    for (const variable of ['QUOTA_REDIS_TLS_CA', 'QUOTA_REDIS_TLS_CERT', 'QUOTA_REDIS_TLS_KEY'] as const) {
      if (config[variable] !== undefined) issue(variable, `only applies to TLS connections to Redis, but ${plain}`);
    }
  });

// zod runs this refinement even when the address itself was refused: an unparsable URL
// counts as TLS here, so only the address's own error is reported, not a second one.
const isTls = (urlOrSeed: string) => urlOrSeed.includes('://') && (!URL.canParse(urlOrSeed) || new URL(urlOrSeed).protocol === 'rediss:');

/** Why the Redis settings are not TLS (undefined when they are): for the TLS variables' error message. */
function plainRedis(config: { QUOTA_REDIS_URL?: string | undefined; QUOTA_REDIS_CLUSTER?: string[] | undefined }): string | undefined {
  if (config.QUOTA_REDIS_URL !== undefined) {
    return isTls(config.QUOTA_REDIS_URL) ? undefined : 'QUOTA_REDIS_URL is a plain redis:// URL (use rediss:// for TLS)';
  }
  if (config.QUOTA_REDIS_CLUSTER !== undefined) {
    return config.QUOTA_REDIS_CLUSTER.every(isTls) ? undefined : 'QUOTA_REDIS_CLUSTER seeds are plain (give them as rediss://host:port URLs for TLS)';
  }
  return 'no Redis is configured (set QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER with rediss://)';
}

export type ServiceConfig = Readonly<z.infer<typeof envSchema>> & {
  /** QUOTA_* variables the service does not know: likely typos, or Kubernetes service links. */
  readonly unknownVariables: readonly string[];
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Reads the QUOTA_* variables once; a bad one fails fast with its name in the message. */
export function loadConfig(env: NodeJS.ProcessEnv): ServiceConfig {
  const own = Object.fromEntries(Object.entries(env).filter(([name, value]) => name.startsWith('QUOTA_') && value !== undefined && value !== ''));
  const parsed = envSchema.safeParse(own);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const unknownVariables = Object.keys(own).filter((name) => !Object.hasOwn(envSchema.shape, name));
  return Object.freeze({ ...parsed.data, unknownVariables });
}
