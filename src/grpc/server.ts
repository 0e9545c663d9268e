import { createServer, type Server } from 'nice-grpc';
import { HealthDefinition, HealthServiceImpl, HealthState } from 'nice-grpc-server-health';
import type { QuotaEngine } from '../engine/engine.js';
import { QuotaServiceDefinition } from '../gen/quota/v1/quota.js';
import type { Logger } from '../logger.js';
import { errorMiddleware } from './error-middleware.js';
import { quotaService } from './quota-service.js';
import { addReflection } from './reflection.js';

export interface QuotaServer {
  /** The bound port (useful with an address ending in :0). */
  readonly port: number;
  readonly health: HealthState;
  /** Stops accepting calls, lets in-flight ones finish within `graceMs`, then cuts the rest. */
  shutdown(graceMs: number): Promise<void>;
}

/** Starts the gRPC server: quota.v1.QuotaService, grpc.health.v1.Health and server reflection. */
export async function startQuotaServer(options: {
  engine: QuotaEngine;
  address: string;
  logger: Logger;
}): Promise<QuotaServer> {
  const server: Server = createServer().use(errorMiddleware(options.logger));
  server.add(QuotaServiceDefinition, quotaService(options.engine));

  const health = HealthState();
  server.add(HealthDefinition, HealthServiceImpl(health));
  addReflection(server, [QuotaServiceDefinition.fullName, HealthDefinition.fullName]);

  const port = await server.listen(options.address);
  health.setStatus('healthy');
  health.setStatus('healthy', QuotaServiceDefinition.fullName);

  return {
    port,
    health,
    async shutdown(graceMs) {
      health.setStatus('unhealthy');
      health.setStatus('unhealthy', QuotaServiceDefinition.fullName);
      const timer = setTimeout(() => server.forceShutdown(), graceMs);
      try {
        await server.shutdown();
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
