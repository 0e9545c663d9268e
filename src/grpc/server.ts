import type { ServerCredentials } from '@grpc/grpc-js';
import { createServer, type Server } from 'nice-grpc';
import { HealthDefinition, HealthState } from 'nice-grpc-server-health';
import type { QuotaEngine } from '../engine/engine.js';
import { QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import type { Logger } from '../logger.js';
import type { CallerRegistry } from '../config/callers.js';
import type { AuditLog } from '../admin/audit.js';
import type { QuotaAdmin } from '../admin/quota-admin.js';
import { adminAccessMiddleware } from './admin-access.js';
import { adminAuditMiddleware } from './admin-audit.js';
import { adminService, adminServiceDefinition } from './admin-service.js';
import { int64RangeMiddleware } from './checked-int64.js';
import { authMiddleware } from './auth-middleware.js';
import { boundedHealthService } from './health-service.js';
import { errorMiddleware } from './error-middleware.js';
import { loggingMiddleware } from './logging-middleware.js';
import { quotaService } from './quota-service.js';
import { quotaServiceDefinition } from './service-definition.js';
import { addReflection } from './reflection.js';
import { Admission, DEFAULT_ADMISSION, type AdmissionLimits } from './admission.js';
import { listenNamed } from '../listen-error.js';
import { RATE_LIMIT_SERVICE, rateLimitServiceDefinition } from '../rls/envoy-codec.js';
import { EMPTY_RLS_CONFIG } from '../rls/rls-config.js';
import type { RlsConfig } from '../rls/rls-rules.js';
import { rateLimitService, type RateLimitServiceOptions } from './rate-limit-service.js';

/** Envoy's rate limit service as served: its configuration (read per call) and its settings. */
export interface RlsServing extends RateLimitServiceOptions {
  config: () => RlsConfig;
}

/** Without a configuration: every domain unknown, so every request OK without a limit. */
const NO_RLS: RlsServing = { config: () => EMPTY_RLS_CONFIG, timeoutMs: 10, shadowMode: false, rateLimitHeaders: true };

export interface QuotaServer {
  /** The bound port (useful with an address ending in :0). */
  readonly port: number;
  /** The health-only port's bound port, when `healthAddress` was given. */
  readonly healthPort: number | undefined;
  /** Reports SERVING (or NOT_SERVING) for the server and for quota.v1.QuotaService. */
  setServing(serving: boolean): void;
  /** Stops accepting calls, lets in-flight ones finish within `graceMs`, then cuts the rest. */
  shutdown(graceMs: number): Promise<void>;
}

/**
 * Starts the gRPC server: quota.v1.QuotaService (and QuotaAdminService when
 * given), grpc.health.v1.Health and server reflection. Health starts NOT_SERVING; call setServing(true) once the
 * store is ready.
 */
export async function startQuotaServer(options: {
  engine: QuotaEngine;
  address: string;
  logger: Logger;
  /** TLS or mTLS (src/grpc/tls.ts); plaintext by default. */
  credentials?: ServerCredentials;
  /** Bearer tokens per caller; unset: no caller authentication. */
  callers?: CallerRegistry;
  /**
   * Also serve grpc.health.v1, and nothing else, in plaintext here: the kubelet's
   * gRPC probe cannot speak TLS, and the main port may require it.
   */
  healthAddress?: string;
  /** Bounds on pending decisions, past which calls are shed (src/grpc/admission.ts). */
  admission?: AdmissionLimits;
  /** What a bind error calls the two addresses (the environment variables that gave them); default: the option names. */
  settingNames?: { address: string; healthAddress: string };
  /** Envoy's rate limit service (always served; without this, with no domain configured). */
  rls?: RlsServing;
  /** Also serve quota.v1.QuotaAdminService, to admins only (src/grpc/admin-access.ts), every call audited (src/grpc/admin-audit.ts). */
  admin?: { admin: QuotaAdmin; audit: AuditLog };
}): Promise<QuotaServer> {
  // Logging outermost, so it sees the status the error middleware chose; the admin audit
  // next, so it sees that status too and every refusal, the auth middleware's included.
  let chain = createServer().use(loggingMiddleware(options.logger));
  if (options.admin) chain = chain.use(adminAuditMiddleware(options.admin.audit));
  chain = chain.use(errorMiddleware(options.logger));
  if (options.callers) chain = chain.use(authMiddleware(options.callers, options.logger));
  const server: Server = chain;
  // Aborted when shutdown starts: open AllowStream streams answer what they have read and end.
  const draining = new AbortController();
  // One admission for both doors: their decisions share the bounds on pending decisions.
  const admission = new Admission(options.admission ?? DEFAULT_ADMISSION);
  server.add(quotaServiceDefinition, quotaService(options.engine, options.logger, draining.signal, admission));
  const rls = options.rls ?? NO_RLS;
  server.add(rateLimitServiceDefinition(), rateLimitService(options.engine, rls.config, admission, options.logger.child({ component: 'rls' }), rls));

  const health = HealthState();
  server.add(HealthDefinition, boundedHealthService(health, draining.signal));
  // The admin check on the admin service alone: after the auth middleware, at no cost to the quota API.
  if (options.admin)
    server
      .with(adminAccessMiddleware({ authenticated: options.callers !== undefined }))
      .with(int64RangeMiddleware)
      .add(adminServiceDefinition, adminService(options.admin.admin));
  addReflection(server, [
    QuotaServiceDefinition.fullName,
    RATE_LIMIT_SERVICE,
    ...(options.admin ? [QuotaAdminServiceDefinition.fullName] : []),
    HealthDefinition.fullName,
  ]);

  const setServing = (serving: boolean) => {
    const status = serving ? 'healthy' : 'unhealthy';
    health.setStatus(status);
    health.setStatus(status, QuotaServiceDefinition.fullName);
    health.setStatus(status, RATE_LIMIT_SERVICE);
  };
  // NOT_SERVING until the caller says the store is ready.
  setServing(false);
  const names = options.settingNames ?? { address: 'address', healthAddress: 'healthAddress' };
  const port = await listenNamed(names.address, options.address, () => server.listen(options.address, options.credentials));
  // The same HealthState: both ports always report the same status.
  const healthServer = options.healthAddress === undefined ? undefined : createServer();
  healthServer?.add(HealthDefinition, boundedHealthService(health, draining.signal));
  let healthPort: number | undefined;
  try {
    healthPort =
      healthServer === undefined
        ? undefined
        : await listenNamed(names.healthAddress, options.healthAddress!, () => healthServer.listen(options.healthAddress!));
  } catch (error) {
    // Half a server is none: the main port must not stay open behind a failed start.
    server.forceShutdown();
    throw error;
  }

  return {
    port,
    healthPort,
    setServing,
    async shutdown(graceMs) {
      setServing(false);
      draining.abort();
      const timer = setTimeout(() => server.forceShutdown(), graceMs);
      try {
        await server.shutdown();
      } finally {
        clearTimeout(timer);
        // Last: the probes see NOT_SERVING for the whole drain, not a closed port.
        healthServer?.forceShutdown();
      }
    },
  };
}
