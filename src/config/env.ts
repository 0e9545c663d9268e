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

/** The most service processes QUOTA_WORKERS may ask for. */
export const MAX_WORKERS = 256;

/** A switch: true or false (also 1 or 0, yes or no). */
const flag = (byDefault: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'expected true or false' })
    .optional()
    .transform((value) => (value === undefined ? byDefault : value === 'true' || value === '1' || value === 'yes'));

/** A number (`fast` is refused as "expected a number", not zod's "received NaN"). */
const number = () => z.coerce.number({ error: 'expected a number' });

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
    QUOTA_SHUTDOWN_GRACE_MS: number().int().min(0).max(600_000).default(10_000),
    // Service processes sharing the gRPC port (src/workers/primary.ts); unset: src/config/worker-count.ts decides.
    QUOTA_WORKERS: z.coerce
      .number({ error: 'expected a whole number of processes, e.g. 2' })
      .int('expected a whole number of processes, e.g. 2')
      .min(1, 'expected at least 1 process')
      .max(MAX_WORKERS, `expected at most ${MAX_WORKERS} processes`)
      .optional(),
    // Store failure handling (src/engine/failure.ts, docs/operations.md).
    QUOTA_STORE_TIMEOUT_MS: number().int().min(1).max(60_000).default(50),
    QUOTA_BREAKER_FAILURES: number().int().min(1).max(1_000).default(5),
    QUOTA_BREAKER_HALF_OPEN_MS: number().int().min(10).max(600_000).default(1_000),
    // Load shedding (src/grpc/admission.ts, docs/operations.md): decisions pending at once, in all and per caller.
    QUOTA_MAX_PENDING_DECISIONS: number().int().min(1).max(10_000_000).default(DEFAULT_ADMISSION.total),
    QUOTA_MAX_PENDING_DECISIONS_PER_CALLER: number().int().min(1).max(10_000_000).default(DEFAULT_ADMISSION.perCaller),
    // Requests whose caller gave up (src/api/quota/stale-requests.ts, docs/operations.md): refused when later than their deadline by more than this.
    QUOTA_CLOCK_SKEW_ALLOWANCE_MS: number().int().min(0).max(3_600_000).default(DEFAULT_CLOCK_SKEW_ALLOWANCE_MS),
    // Authenticated callers (docs/operations.md): TLS/mTLS on the gRPC port, bearer tokens per caller.
    QUOTA_TLS_CERT: z.string().min(1).optional(),
    QUOTA_TLS_KEY: z.string().min(1).optional(),
    QUOTA_TLS_CLIENT_CA: z.string().min(1).optional(),
    QUOTA_AUTH_TOKENS: z.string().min(1).optional(),
    // TLS towards Redis (docs/operations.md): a private CA, a client certificate for tls-auth-clients.
    QUOTA_REDIS_TLS_CA: z.string().min(1).optional(),
    QUOTA_REDIS_TLS_CERT: z.string().min(1).optional(),
    QUOTA_REDIS_TLS_KEY: z.string().min(1).optional(),
    // The decide script as a Redis Function library called with FCALL (Redis 7.0+), else EVALSHA (docs/operations.md).
    QUOTA_REDIS_FUNCTIONS: flag(true),
    // Envoy's rate limit service (docs/envoy.md): its configuration (a file or a directory of YAML files), its
    // store budget (below Envoy's own 20 ms default timeout), the global shadow switch, the RateLimit headers.
    QUOTA_RLS_CONFIG: z.string().min(1).optional(),
    QUOTA_RLS_STORE_TIMEOUT_MS: number().int().min(1).max(60_000).default(10),
    QUOTA_RLS_SHADOW_MODE: flag(false),
    QUOTA_RLS_RATELIMIT_HEADERS: flag(true),
    QUOTA_RLS_NEAR_LIMIT_RATIO: number().gt(0).lte(1).default(0.8),
    // Refuse to start when a QUOTA_* variable is unknown (a typo would otherwise be ignored, e.g. a
    // misspelt QUOTA_REDIS_URL would leave the service on the embedded store).
    QUOTA_STRICT_ENV: flag(false),
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
    if (config.QUOTA_WORKERS !== undefined && config.QUOTA_WORKERS > 1 && config.QUOTA_REDIS_URL === undefined && config.QUOTA_REDIS_CLUSTER === undefined)
      issue(
        'QUOTA_WORKERS',
        'more than one worker needs Redis (QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER): the embedded in-memory store is per process, so each worker would keep its own counts and every limit would be multiplied by the number of workers',
      );
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

/**
 * Reads the QUOTA_* variables once; a bad one fails fast with its name and its value in the
 * message. With QUOTA_STRICT_ENV an unknown QUOTA_* variable fails too, naming the closest known one.
 */
export function loadConfig(env: NodeJS.ProcessEnv): ServiceConfig {
  const own = Object.fromEntries(Object.entries(env).filter(([name, value]) => name.startsWith('QUOTA_') && value !== undefined && value !== '')) as Record<
    string,
    string
  >;
  const unknownVariables = Object.keys(own).filter((name) => !Object.hasOwn(envSchema.shape, name));
  const parsed = envSchema.safeParse(own);
  const lines = parsed.success
    ? []
    : parsed.error.issues.map((issue) => {
        const name = String(issue.path[0] ?? '');
        const value = own[name];
        return `  ${issue.path.join('.')}: ${issue.message}${value === undefined ? '' : ` (got ${quoteValue(value)})`}`;
      });
  const strict = parsed.success ? parsed.data.QUOTA_STRICT_ENV : envSchema.shape.QUOTA_STRICT_ENV.safeParse(own.QUOTA_STRICT_ENV).data === true;
  if (strict)
    for (const name of unknownVariables) lines.push(`  ${name}: ${unknownVariableMessage(name)} (QUOTA_STRICT_ENV refuses unknown QUOTA_* variables)`);
  if (!parsed.success || lines.length > 0) throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  return Object.freeze({ ...parsed.data, unknownVariables });
}

/** A value as an error quotes it: JSON-quoted, a password in a URL replaced by `***`, at most 200 characters. */
function quoteValue(value: string): string {
  const redacted = value.replace(/(:\/\/[^:@/]*:)[^@]*@/g, '$1***@');
  return JSON.stringify(redacted.length > 200 ? `${redacted.slice(0, 200)}...` : redacted);
}

/** `unknown variable; did you mean QUOTA_REDIS_URL?`, or just `unknown variable` when no known name is close. */
export function unknownVariableMessage(name: string): string {
  const closest = closestVariable(name);
  return closest === undefined ? 'unknown variable' : `unknown variable; did you mean ${closest}?`;
}

/**
 * The known variable closest to `name` by edit distance (insertions, deletions,
 * substitutions and swaps of two neighbours, as typos go), if it is close
 * enough to be a typo: at most a third of the part after QUOTA_, at least 2.
 */
export function closestVariable(name: string): string | undefined {
  const upper = name.toUpperCase();
  const limit = Math.max(2, Math.floor((upper.length - 'QUOTA_'.length) / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const known of Object.keys(envSchema.shape)) {
    const distance = editDistance(upper, known);
    if (distance < bestDistance) [best, bestDistance] = [known, distance];
  }
  return best;
}

/** Optimal string alignment distance: Levenshtein plus the swap of two adjacent characters (ULR for URL is 1). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i]!;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, rows[i - 2]![j - 2]! + 1);
    }
  }
  return rows[a.length]![b.length]!;
}
