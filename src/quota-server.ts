import type { ServerCredentials } from '@grpc/grpc-js';
import { QuotaAdminServiceDefinition, QuotaServiceDefinition } from '@quota-service/contract';
import type { QuotaEngine } from './engine/engine.js';
import type { Logger } from './logger.js';
import type { CallerRegistry } from './config/callers.js';
import { DEFAULT_ADMISSION, type AdmissionLimits } from './config/admission-limits.js';
import { Admission } from './grpc/admission.js';
import { int64RangeMiddleware } from './grpc/checked-int64.js';
import { type InjectedConnections, type QuotaServer, startGrpcServer } from './grpc/server.js';
import { ALLOW_PATH, ALLOW_STREAM_PATH, quotaService } from './api/quota/quota-service.js';
import type { StaleRequests } from './api/quota/stale-requests.js';
import { quotaServiceDefinition } from './api/quota/service-definition.js';
import { RATE_LIMIT_SERVICE, rateLimitServiceDefinition, SHOULD_RATE_LIMIT_PATH } from './api/envoy/envoy-codec.js';
import { EMPTY_RLS_CONFIG } from './api/envoy/rls-config.js';
import type { RlsConfig } from './api/envoy/rls-rules.js';
import { rateLimitService, type RateLimitServiceOptions } from './api/envoy/rate-limit-service.js';
import type { AuditLog } from './api/admin/audit.js';
import type { QuotaAdmin } from './api/admin/quota-admin.js';
import { adminAccessMiddleware } from './api/admin/admin-access.js';
import { adminAuditMiddleware } from './api/admin/admin-audit.js';
import { adminService, adminServiceDefinition } from './api/admin/admin-service.js';

export type { QuotaServer } from './grpc/server.js';

/** Envoy's rate limit service as served: its configuration (read per call) and its settings. */
export interface RlsServing extends RateLimitServiceOptions {
  config: () => RlsConfig;
}

/** Without a configuration: every domain unknown, so every request OK without a limit. */
const NO_RLS: RlsServing = { config: () => EMPTY_RLS_CONFIG, timeoutMs: 10, shadowMode: false, rateLimitHeaders: true };

/**
 * Starts the service's gRPC server with its three doors on one port:
 * quota.v1.QuotaService, Envoy's RateLimitService and (when given)
 * quota.v1.QuotaAdminService, plus health and reflection (src/grpc/server.ts).
 * Health starts NOT_SERVING; call setServing(true) once the store is ready.
 */
export function startQuotaServer(options: {
  engine: QuotaEngine;
  address: string;
  logger: Logger;
  /** TLS or mTLS (src/grpc/tls.ts); plaintext by default. */
  credentials?: ServerCredentials;
  /** Bearer tokens per caller; unset: no caller authentication. */
  callers?: CallerRegistry;
  /** Also serve grpc.health.v1, and nothing else, in plaintext here (the kubelet's gRPC probe cannot speak TLS). */
  healthAddress?: string;
  /** Bounds on pending decisions, past which calls are shed (src/grpc/admission.ts). */
  admission?: AdmissionLimits;
  /** Refuses requests that arrive after their caller gave up (src/api/quota/stale-requests.ts); default: the default allowance. */
  stale?: StaleRequests;
  /** What a bind error calls the two addresses (the environment variables that gave them); default: the option names. */
  settingNames?: { address: string; healthAddress: string };
  /** Envoy's rate limit service (always served; without this, with no domain configured). */
  rls?: RlsServing;
  /** Also serve quota.v1.QuotaAdminService, to admins only (src/api/admin/admin-access.ts), every call audited (src/api/admin/admin-audit.ts). */
  admin?: { admin: QuotaAdmin; audit: AuditLog };
  /** Serve Allow, ShouldRateLimit and AllowStream on the lean path (default) or through the middleware (src/grpc/server.ts). */
  lean?: boolean;
  /** The connections another process accepted (a QUOTA_WORKERS primary): the main port binds nothing (src/grpc/server.ts). */
  injected?: InjectedConnections;
}): Promise<QuotaServer> {
  const { engine, logger, admin } = options;
  return startGrpcServer({
    address: options.address,
    logger,
    credentials: options.credentials,
    callers: options.callers,
    healthAddress: options.healthAddress,
    settingNames: options.settingNames,
    audit: admin ? adminAuditMiddleware(admin.audit) : undefined,
    // Envoy sends its timeout with every call: the rate limit service sizes its store budget from it.
    deadlinePaths: [SHOULD_RATE_LIMIT_PATH],
    lean: options.lean,
    injected: options.injected,
    services: {
      add(server, draining, lean) {
        // One admission for both doors: their decisions share the bounds on pending decisions.
        const admission = new Admission(options.admission ?? DEFAULT_ADMISSION);
        const quota = quotaService(engine, logger, draining, admission, options.stale);
        server.add(quotaServiceDefinition, quota);
        const rls = options.rls ?? NO_RLS;
        const rateLimit = rateLimitService(engine, rls.config, admission, logger.child({ component: 'rls' }), rls);
        server.add(rateLimitServiceDefinition(), rateLimit);
        // The hot calls on the lean path: the unary ones (Envoy's, and every caller that is not
        // the batching client) and the batching client's stream.
        lean.unary.set(ALLOW_PATH, quota.allow);
        lean.unary.set(SHOULD_RATE_LIMIT_PATH, rateLimit.shouldRateLimit);
        lean.bidi.set(ALLOW_STREAM_PATH, quota.allowStream);
        // The admin check on the admin service alone: after the auth middleware, at no cost to the quota API.
        if (admin) {
          server
            .with(adminAccessMiddleware({ authenticated: options.callers !== undefined }))
            .with(int64RangeMiddleware)
            .add(adminServiceDefinition, adminService(admin.admin));
        }
        return {
          reflected: [QuotaServiceDefinition.fullName, RATE_LIMIT_SERVICE, ...(admin ? [QuotaAdminServiceDefinition.fullName] : [])],
          health: [QuotaServiceDefinition.fullName, RATE_LIMIT_SERVICE],
        };
      },
    },
  });
}
