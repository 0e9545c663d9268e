import { afterAll, beforeAll } from 'vitest';
import { type RlsClient, rlsClient } from './rls-client.js';
import { startServiceProcess, type ServiceProcess } from './service-process.js';

/** Envoy's rate limit service in a real service process, as a test uses it (useRlsService). */
export interface RlsService {
  /** Calls the service (the gRPC client is made once it listens, so this one forwards to it). */
  readonly client: Pick<RlsClient, 'shouldRateLimit'>;
  /** The process: its port, its log. */
  readonly process: ServiceProcess;
  /** Its Prometheus metrics page (the environment must set QUOTA_METRICS_ADDR). */
  metrics(): Promise<string>;
}

/**
 * A service process with the environment `env()` gives, for the enclosing
 * describe block (or file): started before its tests, once health says
 * SERVING, and killed after them, with a client built from Envoy's protos.
 */
export function useRlsService(env: () => Record<string, string>): RlsService {
  let service: ServiceProcess | undefined;
  let client: RlsClient | undefined;
  let metricsPort: number | undefined;
  beforeAll(async () => {
    const variables = env();
    service = startServiceProcess(variables);
    client = rlsClient(`127.0.0.1:${await service.port}`);
    if (variables.QUOTA_METRICS_ADDR !== undefined) {
      metricsPort = Number(/"port":(\d+)/.exec(await service.logged(/"msg":"metrics at GET \/metrics"/))![1]);
    }
    await service.logged(/health SERVING/);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    service?.signal('SIGKILL');
    await service?.exit;
  });
  const started = () => {
    if (service === undefined || client === undefined) throw new Error('the service is not started yet: use it inside a test or hook');
    return { service, client };
  };
  return {
    client: { shouldRateLimit: (request, metadata) => started().client.shouldRateLimit(request, metadata) },
    get process() {
      return started().service;
    },
    metrics: async () => {
      if (metricsPort === undefined) throw new Error('no metrics address: set QUOTA_METRICS_ADDR');
      return (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    },
  };
}
