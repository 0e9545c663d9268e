import type { ServerCredentials } from '@grpc/grpc-js';
import { createServer, type Server, type ServerMiddleware } from 'nice-grpc';
import { HealthDefinition, HealthState } from 'nice-grpc-server-health';
import type { Logger } from '../logger.js';
import type { CallerRegistry } from '../config/callers.js';
import { listenNamed } from '../listen-error.js';
import { type InjectConnection, serveInjected } from './injected-connections.js';
import { authMiddleware } from './auth-middleware.js';
import { callDeadlineInterceptor } from './call-deadline.js';
import { boundedHealthService } from './health-service.js';
import { errorMiddleware } from './error-middleware.js';
import { loggingMiddleware } from './logging-middleware.js';
import { addReflection } from './reflection.js';
import { LeanRoutes, leanTaker } from './lean-path.js';
import { takeStreams } from './raw-streams.js';

export interface QuotaServer {
  /** The bound port (useful with an address ending in :0). */
  readonly port: number;
  /** The health-only port's bound port, when `healthAddress` was given. */
  readonly healthPort: number | undefined;
  /** Reports SERVING (or NOT_SERVING) for the server and for each service it names for health. */
  setServing(serving: boolean): void;
  /** Stops accepting calls, lets in-flight ones finish within `graceMs`, then cuts the rest. */
  shutdown(graceMs: number): Promise<void>;
}

/** The services a server serves, added by `add` on the server after its middleware. */
export interface ServedServices {
  /**
   * Adds the services. `draining` is aborted when shutdown starts (open streams
   * answer what they have read and end). Answers the full names of the services
   * reflection lists and health reports on by name. A handler put in `lean`
   * (by its method's path) is served on the lean path (lean-path.ts) instead
   * of through the middleware; it must be added to `server` too.
   */
  add(server: Server, draining: AbortSignal, lean: LeanRoutes): { reflected: readonly string[]; health: readonly string[] };
}

/** Connections another process accepted on `port` (injected-connections.ts). */
export interface InjectedConnections {
  port: number;
  receive(inject: InjectConnection): void;
}

/**
 * Starts a gRPC server with the shared transport: logging, an optional audit,
 * error mapping and caller authentication as middleware (the lean path,
 * lean-path.ts, takes the same steps for the handlers put on it: a new
 * middleware belongs there too); grpc.health.v1
 * health (also on a plaintext health-only port when asked) and server
 * reflection. Health starts NOT_SERVING; call setServing(true) once the
 * store is ready.
 */
export async function startGrpcServer(options: {
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
  /** What a bind error calls the two addresses (the environment variables that gave them); default: the option names. */
  settingNames?: { address: string; healthAddress: string };
  /** Right inside the logging, so it sees the status the error middleware chose and every refusal, the auth middleware's included. */
  audit?: ServerMiddleware;
  /** Methods (by path) whose handlers read the caller's deadline (call-deadline.ts). */
  deadlinePaths?: readonly string[];
  services: ServedServices;
  /**
   * The connections come from another process (the primary of QUOTA_WORKERS),
   * which accepted them on `port`: the main port binds nothing, and `receive`
   * is handed the function that serves each one.
   */
  injected?: InjectedConnections;
  /**
   * Serve the handlers the services put on the lean path there (default);
   * false: through the middleware like every other method (the tests run both).
   */
  lean?: boolean;
}): Promise<QuotaServer> {
  const deadlinePaths = options.deadlinePaths ?? [];
  // Filled in by the services; left unserved when the lean path is off.
  const lean = new LeanRoutes();
  const leanServed = options.lean !== false;
  const leanOptions = { logger: options.logger, callers: options.callers };
  // grpc-js's own server options: nice-grpc hands them to the grpc-js Server as they are.
  const serverOptions = { interceptors: [callDeadlineInterceptor(deadlinePaths)] } as object;
  // The lean path's calls are taken off the connection before grpc-js reads them.
  if (leanServed && !takeStreams(serverOptions, leanTaker(lean, leanOptions))) {
    options.logger.warn('this grpc-js offers no stream hook: Allow, AllowStream and ShouldRateLimit are served through the middleware');
  }
  if (options.injected !== undefined) serveInjected(serverOptions, options.injected.receive);
  let chain = createServer(serverOptions).use(loggingMiddleware(options.logger));
  if (options.audit) chain = chain.use(options.audit);
  chain = chain.use(errorMiddleware(options.logger));
  if (options.callers) chain = chain.use(authMiddleware(options.callers, options.logger));
  const server: Server = chain;
  const draining = new AbortController();
  const served = options.services.add(server, draining.signal, lean);

  const health = HealthState();
  server.add(HealthDefinition, boundedHealthService(health, draining.signal));
  addReflection(server, [...served.reflected, HealthDefinition.fullName]);

  const setServing = (serving: boolean) => {
    const status = serving ? 'healthy' : 'unhealthy';
    health.setStatus(status);
    for (const name of served.health) health.setStatus(status, name);
  };
  // NOT_SERVING until the caller says the store is ready.
  setServing(false);
  const names = options.settingNames ?? { address: 'address', healthAddress: 'healthAddress' };
  const bound = await listenNamed(names.address, options.address, () => server.listen(options.address, options.credentials));
  const port = options.injected?.port ?? bound;
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
