// The only place that reads the environment, handles signals and wires the parts.
import { CallerPolicyCheck } from './config/caller-policies.js';
import { CallersFileError, readCallersFile } from './config/callers.js';
import { ReloadableCallerRegistry, watchCallersFile } from './config/callers-watcher.js';
import { ConfigError, loadConfig, unknownVariableMessage } from './config/env.js';
import { readPolicyFile } from './config/policies.js';
import { watchPolicyFile } from './config/policy-watcher.js';
import { QuotaEngine } from './engine/engine.js';
import { startQuotaServer } from './quota-server.js';
import { serverTls } from './grpc/tls.js';
import { routeGrpcLogs } from './grpc/grpc-js-logs.js';
import { ListenError, listenNamed } from './listen-error.js';
import { createLogger } from './logger.js';
import { armShutdownDeadline } from './shutdown-deadline.js';
import { DenialLog } from './engine/denial-log.js';
import { QuotaMetrics } from './metrics/metrics.js';
import { startMetricsServer, type MetricsServer } from './metrics/metrics-server.js';
import { MemoryStore } from './store/memory.js';
import { StoreFailurePolicy } from './engine/failure.js';
import { RedisStore } from './store/redis/redis-store.js';
import { connectionErrorLog, STARTUP_BUDGET_MS } from './store/redis/redis-connection-errors.js';
import { redisTlsMode, redisTlsOptions, watchRedisTls } from './store/redis/redis-tls.js';
import type { QuotaStore } from './store/store.js';
import { RlsMetrics } from './api/envoy/rls-metrics.js';
import { LeaseMetrics } from './metrics/lease-metrics.js';
import { EMPTY_RLS_CONFIG, parseRlsConfig, readRlsTexts, RlsConfigError } from './api/envoy/rls-config.js';
import type { RlsConfig } from './api/envoy/rls-rules.js';
import { watchRlsConfig } from './api/envoy/rls-watcher.js';
import { PolicyFileError, SliceHolder, systemClock } from '@quota-service/core';
import { serviceHolderName, storeSliceSource } from './engine/store-slice-source.js';
import { registerSliceMetrics } from './metrics/slice-metrics.js';
import { AuditLog } from './api/admin/audit.js';
import { QuotaAdmin } from './api/admin/quota-admin.js';
import { MemoryStateReset, RedisStateReset } from './api/admin/state-reset.js';
import { StaleRequests } from './api/quota/stale-requests.js';
import { MemoryOverrides } from './overrides/memory-overrides.js';
import { RedisOverrides } from './overrides/redis-overrides.js';
import { workerCount } from './config/worker-count.js';
import { runPrimary } from './workers/primary.js';
import { isWorker, primaryConnections, reportStarted, shareMetrics, workerNumber } from './workers/worker-side.js';

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const rootLogger = createLogger(config.QUOTA_LOG_LEVEL);
  // With QUOTA_WORKERS above 1 this process is the primary (src/workers/primary.ts), and each worker runs the rest of main.
  const workers = isWorker ? 1 : workerCount(config);
  // Each worker's lines name it: pid and worker number.
  const logger = isWorker ? rootLogger.child({ pid: process.pid, worker: workerNumber }) : rootLogger;
  routeGrpcLogs(logger.child({ component: 'grpc-js' }));
  // Said once, by the primary or the single process.
  if (config.unknownVariables.length > 0 && !isWorker) {
    const named = config.unknownVariables.map((name) => `${name}: ${unknownVariableMessage(name)}`);
    logger.warn(
      { variables: config.unknownVariables },
      `ignoring unknown QUOTA_* variables (typo?): ${named.join('; ')} (QUOTA_STRICT_ENV=1 refuses to start instead)`,
    );
  }
  if (workers > 1) {
    await runPrimary({
      workers,
      graceMs: config.QUOTA_SHUTDOWN_GRACE_MS,
      grpcAddress: config.QUOTA_GRPC_ADDR,
      metricsAddr: config.QUOTA_METRICS_ADDR,
      logger: logger.child({ pid: process.pid, component: 'workers' }),
    });
    return;
  }
  // Watched from here on: a renewed certificate is served without a restart.
  const tls = serverTls(
    { cert: config.QUOTA_TLS_CERT, key: config.QUOTA_TLS_KEY, clientCa: config.QUOTA_TLS_CLIENT_CA },
    { logger: logger.child({ component: 'tls' }) },
  );
  const callersFile = config.QUOTA_AUTH_TOKENS === undefined ? undefined : await readCallersFile(config.QUOTA_AUTH_TOKENS);
  const callers = callersFile === undefined ? undefined : new ReloadableCallerRegistry(callersFile.callers);
  const { text: policyText, policies } = await readPolicyFile(config.QUOTA_POLICIES);
  logger.info({ file: config.QUOTA_POLICIES, policies: [...policies.keys()] }, 'policies loaded');
  const callerPolicies = new CallerPolicyCheck(logger.child({ component: 'callers' }));
  if (callers !== undefined) callerPolicies.check(callers, policies, 'start');
  // Envoy's rate limit service: read and checked before anything connects, like the policies.
  const rlsTexts = config.QUOTA_RLS_CONFIG === undefined ? undefined : await readRlsTexts(config.QUOTA_RLS_CONFIG);
  let rlsConfig: RlsConfig = rlsTexts === undefined ? EMPTY_RLS_CONFIG : parseRlsConfig(rlsTexts);
  if (rlsTexts !== undefined) logger.info({ path: config.QUOTA_RLS_CONFIG, domains: [...rlsConfig.domains.keys()] }, 'rate limit config loaded');

  // Read and checked before any connection: a bad file stops the start naming its variable.
  const redisTlsFiles = { ca: config.QUOTA_REDIS_TLS_CA, cert: config.QUOTA_REDIS_TLS_CERT, key: config.QUOTA_REDIS_TLS_KEY };
  const redisTls = redisTlsOptions(redisTlsFiles);
  const redisTlsDescription = redisTlsMode(config);
  const connectionErrors = connectionErrorLog(logger.child({ component: 'redis' }), {
    tls: redisTlsDescription !== 'off',
    clientCertificate: config.QUOTA_REDIS_TLS_CERT !== undefined,
  });
  const redisOptions = {
    ...(redisTls === undefined ? {} : { tls: redisTls }),
    onConnectionError: connectionErrors.onConnectionError,
    functions: config.QUOTA_REDIS_FUNCTIONS,
  };
  const store: QuotaStore = config.QUOTA_REDIS_URL
    ? RedisStore.connect(config.QUOTA_REDIS_URL, redisOptions)
    : config.QUOTA_REDIS_CLUSTER
      ? RedisStore.connectCluster(config.QUOTA_REDIS_CLUSTER, redisOptions)
      : new MemoryStore();
  // The client holds redisTls itself: a renewed client certificate applies from the next connection.
  const redisTlsWatcher =
    redisTls === undefined || store instanceof MemoryStore
      ? undefined
      : watchRedisTls({ files: redisTlsFiles, live: redisTls, logger: logger.child({ component: 'redis-tls' }) });
  if (store instanceof MemoryStore) {
    logger.info('no Redis configured (QUOTA_REDIS_URL, QUOTA_REDIS_CLUSTER): using the embedded in-memory store; state is per process and lost on restart');
  } else {
    logger.info({ tls: redisTlsDescription, store: store.description }, 'deciding in Redis');
  }

  const metrics = new QuotaMetrics();
  metrics.reloaded(true);
  const failure = new StoreFailurePolicy({
    timeoutMs: config.QUOTA_STORE_TIMEOUT_MS,
    breakerFailures: config.QUOTA_BREAKER_FAILURES,
    halfOpenAfterMs: config.QUOTA_BREAKER_HALF_OPEN_MS,
    logger: logger.child({ component: 'store-failure' }),
    events: metrics,
  });
  metrics.watchStore({ shared: store, local: () => failure.localKeyCount() });
  const rlsMetrics = new RlsMetrics(metrics.registry, config.QUOTA_RLS_NEAR_LIMIT_RATIO);
  let metricsServer: MetricsServer | undefined;
  // A worker's metrics go to its primary, which serves them all summed on QUOTA_METRICS_ADDR.
  shareMetrics(metrics.registry);
  if (config.QUOTA_METRICS_ADDR && !isWorker) {
    const addr = config.QUOTA_METRICS_ADDR;
    metricsServer = await listenNamed('QUOTA_METRICS_ADDR', addr, () => startMetricsServer(addr, metrics.registry));
    logger.info({ addr: config.QUOTA_METRICS_ADDR, port: metricsServer.port }, 'metrics at GET /metrics');
  }
  // Runtime overrides and resets (the admin API): in Redis when the state is, else in this process.
  const overrides = store instanceof RedisStore ? new RedisOverrides(store.client) : new MemoryOverrides(systemClock);
  const stateReset = store instanceof RedisStore ? new RedisStateReset(store.client) : new MemoryStateReset((store as MemoryStore).space);
  // This replica's slices of hot limits (docs/policies.md, "Slices"): only a shared store is worth a slice.
  const slices = store instanceof RedisStore ? new SliceHolder(storeSliceSource(store, serviceHolderName())) : undefined;
  if (slices !== undefined) registerSliceMetrics(metrics.registry, () => slices.counters);
  const engine = new QuotaEngine(policies, store, {
    failure,
    slices,
    overrides,
    onDecision: (policy, decision, seconds) => metrics.decided(policy, decision, seconds),
    leaseEvents: new LeaseMetrics(metrics.registry),
    onReserve: (policy, ttlMs) => metrics.reserved(policy, ttlMs),
    onSettle: (policy, event, reservation) => metrics.settled(policy, event, reservation),
    denials: new DenialLog(logger.child({ component: 'denials' })),
  });
  const audit = new AuditLog(logger.child({ component: 'audit' }));
  const admin = new QuotaAdmin(engine, overrides, stateReset);
  const watcher = watchPolicyFile({
    path: config.QUOTA_POLICIES,
    loadedText: policyText,
    logger: logger.child({ component: 'policies' }),
    onReload: (next) => {
      engine.replacePolicies(next);
      if (callers !== undefined) callerPolicies.check(callers, next, 'policies reloaded');
    },
    onResult: (success) => metrics.reloaded(success),
  });
  const rlsWatcher =
    rlsTexts === undefined
      ? undefined
      : watchRlsConfig({
          path: config.QUOTA_RLS_CONFIG!,
          loadedTexts: rlsTexts,
          logger: logger.child({ component: 'rls-config' }),
          onReload: (next) => {
            rlsConfig = next;
          },
          onResult: (success) => rlsMetrics.reloaded(success),
        });
  const callersWatcher =
    callers === undefined || callersFile === undefined
      ? undefined
      : watchCallersFile({
          path: config.QUOTA_AUTH_TOKENS!,
          loadedText: callersFile.text,
          registry: callers,
          logger: logger.child({ component: 'callers' }),
          onReload: (next) => callerPolicies.check(next, new Map(engine.listPolicies().map((policy) => [policy.name, policy])), 'callers reloaded'),
        });
  const stale = new StaleRequests({ allowanceMs: config.QUOTA_CLOCK_SKEW_ALLOWANCE_MS });
  metrics.watchStaleRequests(stale.refused);
  const server = await startQuotaServer({
    engine,
    stale,
    address: config.QUOTA_GRPC_ADDR,
    logger,
    credentials: tls.credentials,
    callers,
    ...(config.QUOTA_HEALTH_ADDR === undefined ? {} : { healthAddress: config.QUOTA_HEALTH_ADDR }),
    admission: { total: config.QUOTA_MAX_PENDING_DECISIONS, perCaller: config.QUOTA_MAX_PENDING_DECISIONS_PER_CALLER },
    settingNames: { address: 'QUOTA_GRPC_ADDR', healthAddress: 'QUOTA_HEALTH_ADDR' },
    rls: {
      // Read once per call: a reload is seen whole or not at all.
      config: () => rlsConfig,
      timeoutMs: config.QUOTA_RLS_STORE_TIMEOUT_MS,
      shadowMode: config.QUOTA_RLS_SHADOW_MODE,
      rateLimitHeaders: config.QUOTA_RLS_RATELIMIT_HEADERS,
      onDecision: (decision, seconds) => rlsMetrics.decided(decision, seconds),
    },
    admin: { admin, audit },
    // A worker serves the connections its primary accepted on the port.
    injected: primaryConnections(),
  });
  if (config.QUOTA_HEALTH_ADDR !== undefined) {
    logger.info({ addr: config.QUOTA_HEALTH_ADDR, port: server.healthPort }, 'grpc.health.v1 also on a plaintext health-only port');
  }
  logger.info(
    { tls: config.QUOTA_TLS_CERT ? (config.QUOTA_TLS_CLIENT_CA ? 'mutual' : 'server') : 'off', callers: callers?.size ?? 'off' },
    'caller authentication',
  );
  if (callers === undefined && !/^(127\.|\[::1\]|localhost:)/.test(config.QUOTA_GRPC_ADDR)) {
    logger.warn(
      { addr: config.QUOTA_GRPC_ADDR },
      'no caller authentication (QUOTA_AUTH_TOKENS unset) on a non-loopback address: any client may spend any quota',
    );
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    // Whatever hangs below, the process ends in time and says so on stderr.
    armShutdownDeadline(config.QUOTA_SHUTDOWN_GRACE_MS);
    logger.info({ signal, graceMs: config.QUOTA_SHUTDOWN_GRACE_MS }, 'shutting down: draining calls');
    watcher.close();
    rlsWatcher?.close();
    callersWatcher?.close();
    tls.close();
    redisTlsWatcher?.close();
    await server.shutdown(config.QUOTA_SHUTDOWN_GRACE_MS);
    // Only now: a call still draining may need the store.
    // Unused slice units go back before the store closes.
    await slices?.close();
    await store.close();
    await failure.close();
    await metricsServer?.close();
    logger.info({ store: store.description }, 'calls drained, store closed: stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // Only once a signal would drain it: whoever waits for this line may stop the service at once.
  logger.info({ addr: config.QUOTA_GRPC_ADDR, port: server.port }, 'quota service listening');
  reportStarted();

  const waiting = setTimeout(() => logger.warn({ store: store.description }, 'store not answering yet: health stays NOT_SERVING'), STARTUP_BUDGET_MS);
  await store.ready();
  clearTimeout(waiting);
  connectionErrors.connected();
  // A SIGTERM during the wait wins: never SERVING again once shutting down.
  if (stopping) return;
  const eviction = (store as QuotaStore).parts?.evictionRisk();
  if (eviction?.status === 'at_risk') logger.warn({ store: store.description, policies: eviction.policies }, eviction.message);
  if (eviction?.status === 'unknown') logger.warn({ store: store.description }, eviction.message);
  const decide = (store as QuotaStore).parts?.decideCommand();
  if (decide?.command === 'EVALSHA' && config.QUOTA_REDIS_FUNCTIONS) {
    logger.warn(
      { store: store.description, reason: decide.detail },
      'decide script sent as EVALSHA, not as a function library: decisions are the same, each costs Redis more CPU',
    );
  }
  server.setServing(true);
  logger.info({ store: store.description, ...(decide === undefined ? {} : { decide: `${decide.command} (${decide.detail})` }) }, 'store ready: health SERVING');
}

main().catch((error: unknown) => {
  // Before the logger exists (bad env) this is the only voice we have.
  const known =
    error instanceof ConfigError ||
    error instanceof PolicyFileError ||
    error instanceof CallersFileError ||
    error instanceof ListenError ||
    error instanceof RlsConfigError;
  process.stderr.write(`quota-service: ${known ? (error as Error).message : ((error as Error).stack ?? String(error))}\n`);
  process.exit(1);
});
