import { asError, StoreUnavailableError, type Clock, type Decision, type Limit, type Policy, type SourcelessDecision } from '@quota-service/core';
import type { Logger } from '../logger.js';
import { CircuitBreaker, CircuitOpenError, type CircuitStateName } from './circuit-breaker.js';
import { StoreTimeoutError, TurnDeadlines, type SilenceProbe } from './deadline.js';
import { FailureModes, stamped } from './failure-modes.js';
import type { QuotaStore } from '../store/store.js';

/** Why the store could not decide: for metrics (quota_store_failures_total{kind}). */
export type StoreFailureKind = 'timeout' | 'error' | 'circuit_open';

export type { CircuitStateName };

/** Hooks for metrics; the failure policy knows nothing of Prometheus. */
export interface StoreFailureEvents {
  storeFailure(kind: StoreFailureKind): void;
  /** Breakers per state, after any of them changed (or a new partition was seen). */
  circuitStates(counts: Readonly<Record<CircuitStateName, number>>): void;
}

export interface StoreFailureOptions {
  /** Budget for one store decision; past it the policy's failure mode decides. */
  timeoutMs: number;
  /** Consecutive failed store calls that open the circuit. */
  breakerFailures: number;
  /** How long an open circuit waits before one probe call is let through. */
  halfOpenAfterMs: number;
  logger: Logger;
  events?: StoreFailureEvents;
  /** The local limiter's clock (failure mode 'local'); the system clock unless a test runs on virtual time. */
  clock?: Clock;
}

export { StoreTimeoutError };

/** The partition of a store that does not have several (a single node, the embedded store). */
const DEFAULT_PARTITION = 'store';

/** The requests of a decideTogether(), by index: what decide() takes per request. */
export interface TogetherRequests<R> {
  readonly count: number;
  policy(index: number): Policy;
  /** Request `index` decided on the local limiter's `store` with its limits scaled (failure mode 'local'). */
  onLocalStore(index: number, store: QuotaStore, scale: (limit: Limit) => Limit): Promise<SourcelessDecision>;
  /** What the caller makes of request `index`'s decision, whatever its source. */
  after(index: number, decision: Decision): R;
}

/**
 * A store decision within a time budget, behind a circuit breaker,
 * and the policy's failure mode when the store cannot decide.
 *
 * It wraps "a promise of a store decision" and knows nothing of how the
 * engine asks the store, so the engine's decide path can change freely:
 * the engine hands over one function deciding on the shared store and one
 * deciding the same request on a given store with scaled limits (the local
 * limiter: the same TS models on an in-process MemoryStore).
 *
 * The breaker (src/engine/circuit-breaker.ts: a consecutive-failure breaker
 * with one probe call when half-open) is one per store partition, since a dead
 * store is dead for every policy, while a dead cluster shard is dead only for
 * its own slots. A timeout counts as a failure; a script error (a bug) does
 * not and propagates.
 */
export class StoreFailurePolicy {
  private readonly modes: FailureModes;
  /** One breaker per store partition (a cluster shard's master; the whole store on one node). */
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly deadlines: TurnDeadlines;
  /** Deadlines of other budgets than the default (a door with its own, such as Envoy's rate limit service). */
  private readonly otherDeadlines = new Map<number, TurnDeadlines>();
  private silence: SilenceProbe;
  /** Drops the store's connection to a partition whose circuit opened (StoreParts.abandonCalls). */
  private abandon: ((partition: string) => void) | undefined;

  constructor(private readonly options: StoreFailureOptions) {
    this.deadlines = new TurnDeadlines(options.timeoutMs, () => this.silence);
    this.modes = new FailureModes(options.halfOpenAfterMs, options.clock);
  }

  /**
   * The store whose calls this policy times: its silence (StoreParts.silentForMs),
   * not the time a call waited, is what the budget bounds. A store that does
   * not measure it is timed from the moment each call is made. When a circuit
   * opens, the store drops its connection to that partition
   * (StoreParts.abandonCalls), so calls still on their way never spend later.
   */
  timeCallsOf(store: QuotaStore): void {
    const parts = store.parts;
    this.silence = parts === undefined ? undefined : (partition) => parts.silentForMs(partition);
    this.abandon = parts === undefined ? undefined : (partition) => parts.abandonCalls(partition);
  }

  /** Partitions (shards) seen so far, counted by the state of their breaker. */
  circuitStates(): Record<CircuitStateName, number> {
    const counts: Record<CircuitStateName, number> = { closed: 0, open: 0, half_open: 0 };
    for (const breaker of this.breakers.values()) counts[breaker.state]++;
    return counts;
  }

  /** Keys held by the local limiter (for the state-keys metric). */
  localKeyCount(): number {
    return this.modes.localKeyCount();
  }

  private breakerFor(partition: string): CircuitBreaker {
    const known = this.breakers.get(partition);
    if (known !== undefined) return known;
    const log = this.options.logger.child({ partition });
    // True from the first opening of the circuit until it closes: one warning per outage, not per call.
    let outage = false;
    const breaker = new CircuitBreaker({
      failures: this.options.breakerFailures,
      halfOpenAfterMs: this.options.halfOpenAfterMs,
      counts: (error) => error instanceof StoreUnavailableError || error instanceof StoreTimeoutError,
      onBreak: (error) => {
        // Calls made before the circuit opened may still be on their way: they must not spend later.
        this.abandon?.(partition);
        const cause = String((error as Error).message);
        if (outage) {
          log.debug({ cause }, 'store probe failed: circuit open again');
        } else {
          outage = true;
          log.warn(
            { cause, probeEveryMs: this.options.halfOpenAfterMs },
            'store circuit open: store calls stop, policies apply their failure modes until a probe succeeds',
          );
        }
      },
      onReset: () => {
        if (outage) log.info('store answered a probe: circuit closed, decisions from the store again');
        outage = false;
      },
      onStateChange: () => this.options.events?.circuitStates(this.circuitStates()),
    });
    this.breakers.set(partition, breaker);
    this.options.events?.circuitStates(this.circuitStates());
    return breaker;
  }

  /**
   * `partition` names the part of the store the call goes to (StoreParts.partitionOf):
   * a dead cluster shard opens its own breaker, and the other shards keep deciding.
   * `after` maps the decision, whatever its source, in the same step (no
   * promise of its own per decision for the caller's bookkeeping).
   */
  decide<R = Decision>(
    policy: Policy,
    fromStore: () => Promise<SourcelessDecision>,
    onLocalStore: (store: QuotaStore, scale: (limit: Limit) => Limit) => Promise<SourcelessDecision>,
    partition = DEFAULT_PARTITION,
    after: (decision: Decision) => R = identity as (decision: Decision) => R,
    /** A budget of its own for this call; the policy's default (timeoutMs) when absent. */
    timeoutMs?: number,
  ): Promise<R> {
    const deadline = (timeoutMs === undefined ? this.deadlines : this.deadlinesOf(timeoutMs)).start();
    const fromStoreInTime = () => deadline.race(fromStore(), partition);
    const decided = (decision: SourcelessDecision): R => {
      deadline.release();
      return after(stamped(decision, 'store'));
    };
    const failed = (error: unknown): Promise<R> => {
      deadline.release();
      return this.fallbackAfter(error, policy, onLocalStore).then(after);
    };
    try {
      const breaker = this.breakerFor(partition);
      // Closed, the breaker calls the store at once and the deadline's race
      // bounds the call; otherwise a second race bounds the wait for a
      // half-open probe made by another call. The inner race lets the breaker
      // count a timeout as a failure.
      if (breaker.state === 'closed') return breaker.run(fromStoreInTime, decided, failed);
      return deadline.race(breaker.execute(fromStoreInTime), partition).then(decided, failed);
    } catch (error) {
      deadline.release();
      return Promise.reject(error);
    }
  }

  /** Deadlines of a budget other than the default one, made once per budget. */
  private deadlinesOf(ms: number): TurnDeadlines {
    if (ms === this.options.timeoutMs) return this.deadlines;
    let deadlines = this.otherDeadlines.get(ms);
    if (deadlines === undefined) {
      deadlines = new TurnDeadlines(ms, () => this.silence);
      this.otherDeadlines.set(ms, deadlines);
    }
    return deadlines;
  }

  /**
   * A store call that no failure mode can answer for (GetQuota's read, a
   * charge, a settlement, a lease's release or renewal): the same budget and
   * circuit breaker as a decision. When the store cannot answer (silent
   * past the budget, unreachable, or the circuit open) it rejects with
   * StoreUnavailableError at once, never after the driver's own timeout.
   * `timeoutMs`: a budget of its own for this call (as decide's).
   */
  withoutFailureMode<T>(fromStore: () => Promise<T>, partition = DEFAULT_PARTITION, timeoutMs?: number): Promise<T> {
    const deadline = (timeoutMs === undefined ? this.deadlines : this.deadlinesOf(timeoutMs)).start();
    const breaker = this.breakerFor(partition);
    return deadline
      .race(
        breaker.execute(() => deadline.race(fromStore(), partition)),
        partition,
      )
      .then(
        (value) => {
          deadline.release();
          return value;
        },
        (error: unknown) => {
          deadline.release();
          throw this.unavailable(error);
        },
      );
  }

  /** The error a read without failure mode answers: the store's trouble counted and named, a bug as it is. */
  private unavailable(error: unknown): unknown {
    const kind = failureKind(error);
    if (kind === undefined) return error;
    this.options.events?.storeFailure(kind);
    return error instanceof StoreUnavailableError ? error : new StoreUnavailableError(error);
  }

  /**
   * decide() for several requests whose store calls are made together, on one
   * partition (an AllowBatch's decisions, one script call per turn): one
   * deadline and one promise for them all instead of a race, a breaker call
   * and a `then` per request. `fromStore` answers per request its decision or
   * the error its own store call failed with; the whole call failing or timing
   * out fails every request with that error. The breaker counts the requests
   * one by one, in order, and each failed one gets its policy's failure mode,
   * exactly as decide() would have. Undefined when the partition's breaker is
   * not closed: the caller then decides each request with decide().
   */
  decideTogether<R>(
    fromStore: () => Promise<ReadonlyArray<SourcelessDecision | Error>>,
    requests: TogetherRequests<R>,
    partition = DEFAULT_PARTITION,
  ): Promise<Array<PromiseSettledResult<R>>> | undefined {
    const breaker = this.breakerFor(partition);
    if (breaker.state !== 'closed') return undefined;
    const deadline = this.deadlines.start();
    let answers: Promise<ReadonlyArray<SourcelessDecision | Error>>;
    try {
      answers = deadline.race(fromStore(), partition);
    } catch (error) {
      answers = Promise.reject(error);
    }
    return answers.then(
      (decisions) => {
        deadline.release();
        return this.answersTogether(breaker, (i) => decisions[i] ?? new Error(`no answer for request ${i}`), requests);
      },
      (error: unknown) => {
        deadline.release();
        const failure = asError(error);
        return this.answersTogether(breaker, () => failure, requests);
      },
    );
  }

  private answersTogether<R>(
    breaker: CircuitBreaker,
    answerOf: (index: number) => SourcelessDecision | Error,
    requests: TogetherRequests<R>,
  ): Array<PromiseSettledResult<R>> | Promise<Array<PromiseSettledResult<R>>> {
    const results = new Array<PromiseSettledResult<R>>(requests.count);
    let fallbacks: Array<Promise<unknown>> | undefined;
    for (let i = 0; i < requests.count; i++) {
      const answer = answerOf(i);
      try {
        if (!(answer instanceof Error)) {
          breaker.succeeded();
          results[i] = { status: 'fulfilled', value: requests.after(i, stamped(answer, 'store')) };
          continue;
        }
        breaker.failed(answer);
        const index = i;
        const fallback = this.fallbackAfter(answer, requests.policy(i), (store, scale) => requests.onLocalStore(index, store, scale)).then(
          (decision) => (results[index] = { status: 'fulfilled', value: requests.after(index, decision) }),
          (error: unknown) => (results[index] = { status: 'rejected', reason: error }),
        );
        fallbacks ??= [];
        fallbacks.push(fallback);
      } catch (error) {
        results[i] = { status: 'rejected', reason: error };
      }
    }
    return fallbacks === undefined ? results : Promise.all(fallbacks).then(() => results);
  }

  /** The store could not decide: counts why, then the policy's failure mode decides. Any other error (a bug) propagates. */
  private fallbackAfter(
    error: unknown,
    policy: Policy,
    onLocalStore: (store: QuotaStore, scale: (limit: Limit) => Limit) => Promise<SourcelessDecision>,
  ): Promise<Decision> {
    const kind = failureKind(error);
    if (kind === undefined) throw error;
    this.options.events?.storeFailure(kind);
    // 'error': the caller hears of the store's trouble (UNAVAILABLE) instead of a decision.
    if (policy.failure.mode === 'error') throw error instanceof StoreUnavailableError ? error : new StoreUnavailableError(error);
    return this.modes.decide(policy, onLocalStore);
  }

  async close(): Promise<void> {
    await this.modes.close();
  }
}

const identity = <T>(value: T): T => value;

/** Why the store could not answer, or undefined for any other error (a bug). */
function failureKind(error: unknown): StoreFailureKind | undefined {
  if (error instanceof StoreTimeoutError) return 'timeout';
  if (error instanceof CircuitOpenError) return 'circuit_open';
  if (error instanceof StoreUnavailableError) return 'error';
  return undefined;
}
