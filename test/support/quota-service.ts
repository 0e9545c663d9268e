import { createChannel, createClient, type Channel } from 'nice-grpc';
import { loadPolicyFile } from '../../src/config/policies.js';
import { QuotaEngine, type QuotaEngineOptions } from '../../src/engine/engine.js';
import { QuotaServiceDefinition, type QuotaServiceClient } from '@quota-service/contract';
import { startQuotaServer, type QuotaServer, type RlsServing } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import type { QuotaStore } from '../../src/store/store.js';
import type { PolicySet } from '@quota-service/core';

/**
 * Where the hot methods are served: on the lean path (the default) or through
 * nice-grpc's middleware; the tests of a method on the lean path run on both.
 */
export const SERVING_PATHS: Array<[name: string, lean: boolean]> = [
  ['the lean path', true],
  ["nice-grpc's middleware", false],
];

/** A real quota gRPC server on 127.0.0.1:<free port> and a client connected to it. */
export interface TestService {
  readonly server: QuotaServer;
  readonly channel: Channel;
  readonly client: QuotaServiceClient;
  stop(): Promise<void>;
}

export const shippedPolicies = (): Promise<PolicySet> => loadPolicyFile('config/policies.yaml');

export async function startTestService(
  store: QuotaStore,
  policies?: PolicySet,
  options?: QuotaEngineOptions,
  rls?: RlsServing,
  lean = true,
): Promise<TestService> {
  const engine = new QuotaEngine(policies ?? (await shippedPolicies()), store, options);
  const server = await startQuotaServer({ engine, address: '127.0.0.1:0', logger: createLogger('silent'), lean, ...(rls === undefined ? {} : { rls }) });
  await store.ready();
  server.setServing(true);
  const channel = createChannel(`127.0.0.1:${server.port}`);
  return {
    server,
    channel,
    client: createClient(QuotaServiceDefinition, channel),
    async stop() {
      channel.close();
      await server.shutdown(1_000);
    },
  };
}
