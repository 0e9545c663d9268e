import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import { type Clock, type Decision, systemClock } from '@quota-service/core';
import type { CircuitStateName, StoreFailureEvents, StoreFailureKind } from '../engine/failure.js';
import type { SettlementEvent } from '../engine/settle.js';
import type { QuotaStore } from '../store/store.js';
import { DecisionTally } from './decision-tally.js';
import { LatencyHistogram } from './latency-histogram.js';
import { ReservationMetrics } from './reservation-metrics.js';

/** Something that can count its state keys (Redis: DBSIZE; embedded store: live keys). */
export interface KeyCounter {
  keyCount(): Promise<number>;
}

/** How long a scrape waits for a key count before reporting the last one it got. */
const SAMPLE_TIMEOUT_MS = 200;
const CIRCUIT_STATES: readonly CircuitStateName[] = ['closed', 'open', 'half_open'];

/**
 * Every Prometheus metric of the service (decisions, latency, store errors, quota use, keys, leases and reservations),
 * on one registry. Names follow Prometheus conventions: quota_ prefix, _total
 * for counters, _seconds for durations. Label values are policy and limit
 * names from the policy file (bounded), never identities.
 */
export class QuotaMetrics implements StoreFailureEvents {
  readonly registry = new Registry();

  /** Counted per decision, handed to quota_decisions_total when scraped (src/metrics/decision-tally.ts). */
  private readonly tally = new DecisionTally();

  private readonly decisions: Counter<'policy' | 'limit' | 'result' | 'source'> = new Counter({
    name: 'quota_decisions_total',
    help: 'Allow decisions by policy, limit (the rejecting one, else the first of the policy), result (allowed|rejected) and source (store|fail_open|fail_closed|local).',
    labelNames: ['policy', 'limit', 'result', 'source'] as const,
    registers: [this.registry],
    collect: () => this.tally.drain((labels, count) => this.decisions.inc(labels, count)),
  });

  /** Observed per decision: prom-client's Histogram output at a fraction of its cost (src/metrics/latency-histogram.ts). */
  private readonly checkDuration = new LatencyHistogram({
    name: 'quota_check_duration_seconds',
    help: 'Time to decide one Allow call inside the service (store call or failure mode included), by source.',
    labelName: 'source',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  private readonly storeFailures = new Counter({
    name: 'quota_store_failures_total',
    help: 'Store calls that did not decide: kind timeout (over QUOTA_STORE_TIMEOUT_MS), error (connection or Redis reply), circuit_open (not attempted).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  private readonly circuit = new Gauge({
    name: 'quota_store_circuit_state',
    help: 'Circuit breakers in front of the store by state (closed, open, half_open): one per store partition seen so far (a Redis Cluster shard; the whole store on a single node).',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });

  private readonly reloads = new Counter({
    name: 'quota_config_reloads_total',
    help: 'Policy file reloads by result (success, failure: the old policies stay in force).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  private readonly lastReload = new Gauge({
    name: 'quota_config_last_reload_success_timestamp_seconds',
    help: 'Unix time of the last successful policy load (with QUOTA_WORKERS above 1: the oldest of the workers).',
    registers: [this.registry],
    // Summed over workers (src/workers/primary.ts) a timestamp means nothing; the oldest shows a worker that failed a reload.
    aggregator: 'min',
  });

  /** Reservations and settlements (src/metrics/reservation-metrics.ts). */
  private readonly reservations: ReservationMetrics;

  constructor(clock: Clock = systemClock) {
    collectDefaultMetrics({ register: this.registry });
    this.reservations = new ReservationMetrics(this.registry, clock);
    this.circuitStates({ closed: 0, open: 0, half_open: 0 });
    for (const result of ['success', 'failure']) this.reloads.inc({ result }, 0);
  }

  /** Samples the state keys of the shared store and of the local limiter on each scrape. */
  watchStore(stores: { shared: KeyCounter | object; local?: () => number }): void {
    let last = { shared: 0, local: 0 };
    const shared = stores.shared;
    new Gauge({
      name: 'quota_state_keys',
      help: "Quota state keys held, by store: shared (Redis DBSIZE of the quota database, or the embedded store) and local (the local failure-mode limiter; with QUOTA_WORKERS above 1, the largest worker's). Sampled at scrape time.",
      labelNames: ['store'] as const,
      registers: [this.registry],
      // Every worker reads the same DBSIZE: summing would count the shared store once per worker.
      aggregator: 'max',
      async collect() {
        if (isKeyCounter(shared)) {
          const count = await withTimeout(shared.keyCount(), SAMPLE_TIMEOUT_MS).catch(() => undefined);
          if (count !== undefined) last = { ...last, shared: count };
        }
        if (stores.local) last = { ...last, local: stores.local() };
        this.set({ store: 'shared' }, last.shared);
        this.set({ store: 'local' }, last.local);
      },
    });
    let lastRisk = 0;
    new Gauge({
      name: 'quota_store_eviction_risk',
      help: '1 when the store may evict quota state before its TTL (a Redis maxmemory-policy other than noeviction, read at start); 0 otherwise, or when the store cannot tell (then the start-up log says so).',
      registers: [this.registry],
      aggregator: 'max',
      async collect() {
        // Read once at start by the store (src/store/redis/eviction-check.ts); undefined until then.
        const answer = (shared as Partial<Pick<QuotaStore, 'parts'>>).parts?.evictionRisk();
        if (answer !== undefined) lastRisk = answer.status === 'at_risk' ? 1 : 0;
        this.set(lastRisk);
      },
    });
    new Gauge({
      name: 'quota_store_decide_by_function',
      help: "1 when decisions reach Redis as FCALL of the decide script's function library; 0 when they go as EVALSHA (Redis refused the library, QUOTA_REDIS_FUNCTIONS=false, not loaded yet) or the store is the embedded one.",
      registers: [this.registry],
      // A worker that fell back to EVALSHA shows.
      aggregator: 'min',
      collect() {
        const decide = (shared as Partial<Pick<QuotaStore, 'parts'>>).parts?.decideCommand();
        this.set(decide?.command === 'FCALL' ? 1 : 0);
      },
    });
  }

  /**
   * quota_stale_requests_total from the door's own tally of requests refused
   * because their caller had given up (plain numbers per rpc, counted where
   * they are refused), handed to prom-client at scrape time.
   */
  watchStaleRequests(refused: Readonly<Record<string, number>>): void {
    const reported: Record<string, number> = {};
    const counter: Counter<'rpc'> = new Counter({
      name: 'quota_stale_requests_total',
      help: 'Requests refused with DEADLINE_EXCEEDED, nothing spent, because they arrived after their caller stopped waiting (deadline_ms, sent_at_unix_ms), by rpc (Allow, AllowBatch, AllowStream; a batch counts each request).',
      labelNames: ['rpc'] as const,
      registers: [this.registry],
      collect() {
        for (const rpc of Object.keys(refused)) {
          const delta = refused[rpc]! - (reported[rpc] ?? 0);
          if (delta > 0) counter.inc({ rpc }, delta);
          reported[rpc] = refused[rpc]!;
        }
      },
    });
    for (const rpc of Object.keys(refused)) counter.inc({ rpc }, 0);
  }

  decided(policy: string, decision: Decision, seconds: number): void {
    const limit = decision.deniedBy || decision.limits[0]?.name || '';
    this.tally.add(policy, limit, decision.allowed, decision.source);
    this.checkDuration.observe(decision.source, seconds);
  }

  /** A new reservation (QuotaEngineOptions.onReserve). */
  reserved(policy: string, ttlMs: number): void {
    this.reservations.reserved(policy, ttlMs);
  }

  /** A settlement its record answered (QuotaEngineOptions.onSettle): the first one moves its difference. */
  settled(policy: string, event: SettlementEvent, reservation: boolean): void {
    this.reservations.settled(policy, event, reservation);
  }

  storeFailure(kind: StoreFailureKind): void {
    this.storeFailures.inc({ kind });
  }

  circuitStates(counts: Readonly<Record<CircuitStateName, number>>): void {
    for (const name of CIRCUIT_STATES) this.circuit.set({ state: name }, counts[name]);
  }

  reloaded(success: boolean): void {
    this.reloads.inc({ result: success ? 'success' : 'failure' });
    if (success) this.lastReload.set(Date.now() / 1000);
  }
}

function isKeyCounter(value: unknown): value is KeyCounter {
  return typeof (value as Partial<KeyCounter>).keyCount === 'function';
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
