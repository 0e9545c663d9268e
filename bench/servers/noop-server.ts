// Child process: the baseline. Same proto, same nice-grpc/grpc-js server stack,
// same process model as the quota service, but Allow does no work at all, so
// its throughput is what the transport alone allows on this machine right now.
import { createServer } from 'nice-grpc';
import { DecisionSource, type AllowResponse } from '@quota-service/contract';
import { quotaServiceDefinition, type QuotaServiceHandlers } from '../../src/api/quota/service-definition.js';
import { rateLimitServiceDefinition, type RateLimitResponse } from '../../src/api/envoy/envoy-codec.js';
import { failStart, serveUntilParentLeaves } from './lifecycle.js';

/**
 * Shaped like a real allowed answer of the bench policy (one LimitStatus), so
 * both servers encode and send the same amount: the ratio then measures the
 * decision (engine + Redis), not a smaller response.
 */
const ALLOWED: AllowResponse = {
  allowed: true,
  retryAfterMs: 0,
  deniedBy: '',
  limits: [{ name: 'bench', algorithm: 'token_bucket', limit: 1_000_000_000, remaining: 999_999_999, resetAfterMs: 1, applied: 1, plan: '', leasesHeld: 0 }],
  delayMs: 0,
  source: DecisionSource.DECISION_SOURCE_STORE,
  leaseExpiresInMs: 0,
};

// The service's own definition: both encode their answers the same way.
const noop: QuotaServiceHandlers = {
  async allow() {
    return ALLOWED;
  },
  async allowBatch(request) {
    return { results: request.requests.map(() => ({ response: ALLOWED })) };
  },
  async *allowStream(batches) {
    for await (const batch of batches) yield { id: batch.id, results: batch.requests.map(() => ({ response: ALLOWED })) };
  },
  async listPolicies() {
    return { policies: [] };
  },
  async getQuota() {
    return { limits: ALLOWED.limits };
  },
  async settle() {
    return { estimate: 1, actualCost: 1, delta: 0, alreadySettled: false, limits: ALLOWED.limits };
  },
  async release() {
    return { released: true, limits: ALLOWED.limits };
  },
  async renew() {
    return { leaseExpiresInMs: 1000 };
  },
  async takeSlice() {
    return { taken: 0, validMs: 0, remaining: 0, returned: 0 };
  },
};

/** Envoy's answer to a two-descriptor request under limits that never fill (bench/unary-cpu.ts): both OK, each with its limit. */
const RLS_OK: RateLimitResponse = {
  overall_code: 1,
  statuses: [0, 1].map(() => ({
    code: 1,
    current_limit: { name: 'bench', requests_per_unit: 1_000_000_000, unit: 1 },
    limit_remaining: 999_999_999,
    duration_until_reset: { seconds: 0, nanos: 1_000_000 },
  })),
  response_headers_to_add: [],
};

async function main(): Promise<void> {
  const server = createServer();
  server.add(quotaServiceDefinition, noop);
  server.add(rateLimitServiceDefinition(), {
    async shouldRateLimit() {
      return RLS_OK;
    },
  });
  const port = await server.listen('127.0.0.1:0');
  serveUntilParentLeaves(port, () => server.shutdown());
}

main().catch(failStart);
