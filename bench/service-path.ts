// Child of bench/service-path-run.ts, run as compiled JavaScript (bench/compiled.ts).
// The quota service's own CPU per decision, outside the store and the network:
// an AllowBatch of 100 decoded from protobuf, the service's AllowBatch handler,
// the engine (validation, keys, slot groups), the failure policy (deadline,
// breaker), the metrics a production service counts, and the reply encoded, on a
// store that answers at once. One process, no Redis and no sockets, so the figure
// is far steadier than a server's share in the end-to-end benches.
import { parsePolicies } from '../src/config/policies.js';
import { QuotaEngine } from '../src/engine/engine.js';
import { AllowBatchRequest, AllowBatchResponse } from '../src/gen/quota/v1/quota.js';
import { quotaService } from '../src/grpc/quota-service.js';
import { createLogger } from '../src/logger.js';
import { QuotaMetrics } from '../src/metrics/metrics.js';
import type { QuotaStore } from '../src/store/store.js';

const BATCH = 100;
const USERS = 10_000;
const BATCHES_PER_ROUND = 2_000;
const ROUNDS = 9;

const policies = parsePolicies(
  `
policies:
  bench:
    limits:
      - { name: bench, key_by: user, algorithm: token_bucket, capacity: 1000000000, refill_per_second: 1000000 }
`,
  'bench policies',
);

/** A single-node store that allows everything at once: only the service's own code is left to measure. */
const instantStore: QuotaStore = {
  description: 'answers at once',
  slotOf: () => undefined,
  partitionOf: () => 'store',
  decide: () => Promise.reject(new Error('not used')),
  decideAll: () => Promise.reject(new Error('not used')),
  decideGroup: (calls) => Promise.resolve({ outcomes: calls.map(() => ({ allowed: true, retryAfterMs: 0, remaining: 999, resetAfterMs: 1 })), nowMs: 1 }),
  remember: async () => {},
  ready: async () => {},
  close: async () => {},
};

async function main(): Promise<void> {
  const metrics = new QuotaMetrics();
  const engine = new QuotaEngine(policies, instantStore, { onDecision: (policy, decision, seconds) => metrics.decided(policy, decision, seconds) });
  const service = quotaService(engine, createLogger('silent'), new AbortController().signal);
  let user = 0;
  const encoded = Array.from({ length: 100 }, () =>
    AllowBatchRequest.encode({
      requests: Array.from({ length: BATCH }, () => ({ policy: 'bench', identity: { user: `bench-user-${user++ % USERS}` }, cost: 1, requestId: '' })),
    }).finish(),
  );
  const run = async (batches: number) => {
    for (let i = 0; i < batches; i++) {
      const response = await service.allowBatch(AllowBatchRequest.decode(encoded[i % encoded.length]!), {} as never);
      // The implementation's type is the partial nice-grpc accepts; ours always fills every field.
      AllowBatchResponse.encode(response as AllowBatchResponse).finish();
    }
  };
  await run(BATCHES_PER_ROUND); // warm-up: JIT
  const perDecision: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const before = process.cpuUsage();
    await run(BATCHES_PER_ROUND);
    const used = process.cpuUsage(before);
    perDecision.push((used.user + used.system) / (BATCHES_PER_ROUND * BATCH));
  }
  perDecision.sort((a, b) => a - b);
  process.stdout.write(
    `service CPU per decision outside the store (AllowBatch of ${BATCH}, ${ROUNDS} rounds x ${BATCHES_PER_ROUND} batches): ` +
      `min ${perDecision[0]!.toFixed(2)} µs, median ${perDecision[Math.floor(ROUNDS / 2)]!.toFixed(2)} µs\n`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
