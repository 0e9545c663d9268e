// Child of bench/service-path-run.ts, run as compiled JavaScript (bench/compiled.ts).
// The quota service's own CPU per decision, outside the store and the network:
// an AllowBatch of 100 decoded from protobuf, the service's AllowBatch handler,
// the engine (validation, keys, slot groups), the failure policy (deadline,
// breaker), the metrics a production service counts, and the reply encoded, on a
// store that answers at once. One process, no Redis and no sockets, so the figure
// is far steadier than a server's share in the end-to-end benches.
//
// A second phase sends AllowBatch calls of one request, one at a time, on a store
// that answers on the next turn of the event loop as a network reply would: a
// caller at concurrency 1. There each call's objects live across turns, so what
// survives a scavenge (promoted, reclaimed only by a mark-compact) shows. The
// phases are marked for the parent, which runs this with --trace-gc-nvp (bench/gc-trace.ts).
import { parsePolicies } from '@quota-service/core';
import { QuotaEngine } from '../src/engine/engine.js';
import { AllowBatchRequest, AllowBatchResponse } from '@quota-service/contract';
import { quotaService } from '../src/api/quota/quota-service.js';
import { createLogger } from '../src/logger.js';
import { QuotaMetrics } from '../src/metrics/metrics.js';
import type { QuotaStore } from '../src/store/store.js';

const BATCH = 100;
const USERS = 10_000;
const BATCHES_PER_ROUND = 2_000;
const ROUNDS = 9;
/** One-at-a-time phase: calls per round. */
const SINGLES_PER_ROUND = 20_000;

const policies = parsePolicies(
  `
policies:
  bench:
    limits:
      - { name: bench, key_by: user, algorithm: token_bucket, capacity: 1000000000, refill_per_second: 1000000 }
`,
  'bench policies',
);

const allowAll = (calls: readonly unknown[]) => ({
  outcomes: calls.map(() => ({ allowed: true, retryAfterMs: 0, remaining: 999, resetAfterMs: 1 })),
  nowMs: 1,
});

/** A single-node store that allows everything, answering as `answer` says: only the service's own code is left to measure. */
function allowingStore(description: string, answer: <T>(reply: T) => Promise<T>): QuotaStore {
  return {
    description,
    decide: (steps) => answer(steps.map((step) => allowAll(step.calls))),
    remember: async () => {},
    ready: async () => {},
    close: async () => {},
  };
}

const atOnce = <T>(reply: T) => Promise.resolve(reply);
const nextTurn = <T>(reply: T) => new Promise<T>((resolve) => setImmediate(() => resolve(reply)));

/** The service as production wires it, on `store`; `run(calls)` sends that many AllowBatch calls of `size` one after the other. */
function servicePath(store: QuotaStore, size: number) {
  const metrics = new QuotaMetrics();
  const engine = new QuotaEngine(policies, store, { onDecision: (policy, decision, seconds) => metrics.decided(policy, decision, seconds) });
  const service = quotaService(engine, createLogger('silent'), new AbortController().signal);
  let user = 0;
  const encoded = Array.from({ length: Math.ceil(USERS / size) }, () =>
    AllowBatchRequest.encode({
      requests: Array.from({ length: size }, () => ({
        policy: 'bench',
        identity: { user: `bench-user-${user++ % USERS}` },
        cost: 1,
        requestId: '',
        deadlineMs: 0,
        sentAtUnixMs: 0,
      })),
    }).finish(),
  );
  return async (calls: number) => {
    for (let i = 0; i < calls; i++) {
      const response = await service.allowBatch(AllowBatchRequest.decode(encoded[i % encoded.length]!), { peer: 'ipv4:127.0.0.1:1' } as never);
      // As the server encodes it: without fromPartial (src/api/quota/service-definition.ts).
      AllowBatchResponse.encode(response).finish();
    }
  };
}

/** Warms up, then measures `rounds` rounds of `calls` calls; prints CPU per decision, marks the rounds for the GC trace. */
async function measure(phase: string, label: string, run: (calls: number) => Promise<void>, calls: number, size: number): Promise<void> {
  await run(calls); // warm-up: JIT
  const perDecision: number[] = [];
  process.stdout.write(`gc-phase-start ${phase}\n`);
  for (let round = 0; round < ROUNDS; round++) {
    const before = process.cpuUsage();
    await run(calls);
    const used = process.cpuUsage(before);
    perDecision.push((used.user + used.system) / (calls * size));
  }
  process.stdout.write(`gc-phase-end ${phase} ${ROUNDS * calls * size}\n`);
  perDecision.sort((a, b) => a - b);
  process.stdout.write(
    `${label} (${ROUNDS} rounds x ${calls} calls): min ${perDecision[0]!.toFixed(2)} µs, median ${perDecision[Math.floor(ROUNDS / 2)]!.toFixed(2)} µs\n`,
  );
}

async function main(): Promise<void> {
  await measure(
    'batch',
    `service CPU per decision outside the store (AllowBatch of ${BATCH})`,
    servicePath(allowingStore('answers at once', atOnce), BATCH),
    BATCHES_PER_ROUND,
    BATCH,
  );
  await measure(
    'one-at-a-time',
    'service CPU per decision outside the store (AllowBatch of 1, one at a time, store answering next turn)',
    servicePath(allowingStore('answers on the next turn', nextTurn), 1),
    SINGLES_PER_ROUND,
    1,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
