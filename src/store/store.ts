import type { GroupDecision, LimitCall, Memo, Settlement, SliceOp } from '@quota-service/core';
import type { EvictionRisk } from './redis/eviction-check.js';

/**
 * A request id's records as the engine names them: where the request's
 * decision (or reservation) is remembered, and where a settlement marks a
 * limit settled, when the store leads with the limit at `index` of the step's
 * calls. A store of one part leads with the first limit; on a Redis Cluster
 * the first limit of the lowest hash slot, whose slot then holds the record.
 */
export interface RequestRecords {
  memoAt(index: number): Omit<Memo, 'count' | 'claim'> | undefined;
  markAt(index: number): Omit<Memo, 'count' | 'claim'> | undefined;
}

/**
 * One question to the store about a set of limit calls (each with its own
 * key and cost), answered as one atomic step whatever part of the store the
 * keys live on:
 *
 * - `spend`: checks every call, then spends on all of them only if all allow.
 *   With `records` (a request id) the decision is remembered, and a retry
 *   answers the remembered one (`replayed`) and spends nothing more; `memo`
 *   instead names the record outright, for a step whose calls share one slot.
 * - `peek`, `check`: every call's status; writes nothing (`check` reads a
 *   check-only call as a spend would, `peek` reads the state as it is).
 * - `charge`: spends each cost without checking it, into debt if need be.
 * - `release`, `renew`: the lease of each concurrency call (LimitCall.lease).
 * - `refund`: gives back what a spend at `spentAtMs` took.
 * - `settle`: settles the reservation the request id remembered: its actual
 *   cost against its estimate, once (`settlement`).
 */
export type DecideStep = ScriptedStep | SliceStep;

/**
 * A holder's slice of one limit (docs/policies.md, "Slices"), its one call
 * (whose cost is ignored): `take` gives back `giveBack` units of the holder's
 * previous slice, then takes a new one; `give-back` only gives back. The
 * decision's `slice` says what happened; its `outcomes` are empty.
 */
export interface SliceStep {
  readonly mode: 'slice';
  readonly calls: readonly [LimitCall];
  /** Names the holder: its slice's record (keys.md). */
  readonly holder: string;
  readonly op: SliceOp;
  readonly giveBack: number;
}

/** Every step but a slice: the ones the decide driver runs. */
export type ScriptedStep =
  | { readonly mode: 'spend'; readonly calls: readonly LimitCall[]; readonly records?: RequestRecords; readonly memo?: Memo }
  | { readonly mode: 'peek' | 'check' | 'charge' | 'release' | 'renew'; readonly calls: readonly LimitCall[] }
  | { readonly mode: 'refund'; readonly calls: readonly LimitCall[]; readonly spentAtMs: number; readonly memo?: Memo }
  | {
      readonly mode: 'settle';
      readonly calls: readonly LimitCall[];
      readonly actualCost: number;
      readonly records: RequestRecords;
      /**
       * Told of the reservation's record as soon as it answers (settled now or
       * before, with when the limit holding it spent), whether or not the
       * other parts of the store answer after it.
       */
      readonly onRecord?: (settlement: Settlement, recordSpentAtMs: number) => void;
    };

/**
 * What the failure policy and the operator's endpoints need of a store whose
 * state lives in separate parts (the masters of a Redis Cluster, or one
 * Redis node): each part has its own circuit breaker.
 */
export interface StoreParts {
  /** The part the step's first call goes to (its breaker and budget apply to the step). */
  partitionOf(calls: readonly LimitCall[]): string;
  /**
   * How long (ms) the part has had calls outstanding without answering any of
   * them; 0 when nothing is outstanding. The failure policy's budget counts
   * this silence, not the time a call waited: a store that answers is busy, not down.
   */
  silentForMs(partition: string): number;
  /**
   * The failure policy gave up on the part (its circuit opened): drop the
   * connection to it at once, so that calls still on their way never reach the
   * store later and spend there after their callers got the failure mode's answer.
   */
  abandonCalls(partition: string): void;
  /** Whether the store could drop quota state early, as checked by ready(); undefined before. */
  evictionRisk(): EvictionRisk | undefined;
  /** How the decide script reaches Redis now (FCALL of its library, or EVALSHA and why), for the startup log. */
  decideCommand(): { command: string; detail: string };
}

/**
 * Where decisions are made: Redis (one Lua script per step, on Redis's
 * clock) or the embedded in-memory store (the same algorithms as TS models).
 */
export interface QuotaStore {
  /** For the startup log, e.g. "redis 127.0.0.1:6379" or "embedded in-memory store". */
  readonly description: string;
  /**
   * Decides each step, answered together in the steps' order: per step its
   * decision, or the error it failed with. The steps of one call reach the
   * store in one go (one script call per Redis node), in their order.
   */
  decide(steps: readonly DecideStep[]): Promise<Array<GroupDecision | Error>>;
  /** Stores `value` (encodeRemembered) as the remembered decision; '' forgets it. */
  remember(memo: Memo, value: string): Promise<void>;
  /** Resolves once the store has answered; the service reports SERVING only after that. */
  ready(): Promise<void>;
  close(): Promise<void>;
  /**
   * A store whose state lives in separate parts that fail on their own
   * (Redis). Absent: one part, timed from the moment each call is made (the
   * embedded store answers within the turn, so its budget never runs out).
   */
  readonly parts?: StoreParts;
}

/**
 * Whether a settlement's record holds a reservation to settle, of as many
 * limits as the step has: only then is anything adjusted (else the engine
 * refuses the settlement).
 */
export function settlesEveryLimit(step: { readonly calls: readonly LimitCall[] }, settlement: Settlement): boolean {
  return (settlement.status === 'settled' || settlement.status === 'applied') && settlement.spentAtMs.length === step.calls.length;
}

/** Tells a settle step's onRecord of its record's answer, where the record is the limit at `index`. */
export function tellRecord(step: Extract<ScriptedStep, { mode: 'settle' }>, decision: GroupDecision, index: number): void {
  const settlement = decision.settlement;
  if (settlement !== undefined && step.onRecord !== undefined && settlesEveryLimit(step, settlement))
    step.onRecord(settlement, settlement.spentAtMs[index] ?? 0);
}

/** The one decision of a one-step decide: its answer, or a rejection with its error. */
export function decideOne(store: QuotaStore, step: DecideStep): Promise<GroupDecision> {
  return store.decide([step]).then(firstAnswer);
}

function firstAnswer(answers: Array<GroupDecision | Error>): GroupDecision {
  const answer = answers[0];
  if (answer === undefined) throw new Error('the store answered no decision');
  if (answer instanceof Error) throw answer;
  return answer;
}
