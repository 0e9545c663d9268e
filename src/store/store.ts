import type { DecideMode, DecideOptions, GroupDecision, Limit, LimitCall, LimitOutcome, Memo } from '@quota-service/core';
import type { EvictionRisk } from './redis/eviction-check.js';

/** How decideGroups decides one entry: its mode, and for a refund the time of the spend it undoes. */
export interface DecideStep {
  mode: DecideMode;
  spentAtMs?: number;
}

/**
 * Where decisions are made: Redis (one Lua script per decision, on Redis's
 * clock) or the embedded in-memory store (the same algorithms as TS models).
 */
export interface QuotaStore {
  /** For the startup log, e.g. "redis 127.0.0.1:6379" or "embedded in-memory store". */
  readonly description: string;
  /** Decides one limit for one identity and spends `cost` if allowed; atomic. */
  decide(limit: Limit, identityKey: string, cost: number): Promise<LimitOutcome>;
  /**
   * Decides every call in one atomic step: checks all, then (mode 'spend')
   * spends on all only if all allow, or (mode 'peek') writes nothing. Outcomes
   * in the order of `calls`. Redis needs all keys of one call in one slot.
   */
  decideAll(calls: readonly LimitCall[], mode: DecideMode): Promise<LimitOutcome[]>;
  /**
   * decideAll, also answering the store time it decided at; mode 'refund'
   * needs `spentAtMs`, that time of the spend it undoes, and a `memo` makes a
   * spend idempotent (decide.lua).
   */
  decideGroup(calls: readonly LimitCall[], mode: DecideMode, options?: DecideOptions): Promise<GroupDecision>;
  /**
   * decideGroup(calls, mode) for each entry of `list`, in order, answered
   * together: per entry its decision, or the error decideGroup would have
   * rejected with. One promise for a whole AllowBatch (src/engine/engine.ts).
   * `mode` may also give each entry its own step: a phase of cross-slot
   * decisions mixes spends, checks and refunds (src/engine/phased-spend.ts).
   */
  decideGroups(list: readonly (readonly LimitCall[])[], mode: DecideMode | readonly DecideStep[]): Promise<Array<GroupDecision | Error>>;
  /** Stores `value` (encodeRemembered) as the remembered decision; '' forgets it. */
  remember(memo: Memo, value: string): Promise<void>;
  /**
   * The hash slot of a key on a Redis Cluster: calls whose keys share a slot
   * can be decided in one atomic step. Stores without slots omit it or answer undefined (one step always).
   */
  slotOf?(key: string): number | undefined;
  /**
   * Whether one script call can decide `calls`, whose keys lie in several
   * slots, all or nothing: on a Redis Cluster with node batches, when one
   * master serves every slot (as last seen). Such a call that finds a slot
   * elsewhere writes nothing and answers SlotsApart (store-errors.ts).
   */
  decidesInOneCall?(calls: readonly LimitCall[]): boolean;
  /** Resolves once the store has answered; the service reports SERVING only after that. */
  ready(): Promise<void>;
  /**
   * Whether the store could drop quota state early, as checked
   * by ready(); for the health and metrics endpoints. Stores that cannot evict omit it.
   */
  evictionRisk?(): EvictionRisk | undefined;
  /**
   * The part of the store a key lives on, for one circuit breaker per part: the
   * master that owns the key's slot on a Redis Cluster. Stores of one part omit it.
   * `slot`: the key's slot, when the caller already knows it (slotOf).
   */
  partitionOf?(key: string, slot?: number): string;
  /**
   * How long (ms) the part of the store `partition` names (partitionOf; one
   * part: ignored) has had calls outstanding without answering any of them; 0
   * when nothing is outstanding. The failure policy's budget counts this
   * silence, not the time a call waited: a store that answers is busy, not
   * down. A store that omits it is taken as silent from the moment a call is made.
   */
  silentForMs?(partition: string): number;
  /**
   * The failure policy gave up on `partition` (its circuit opened): drop the
   * connection to it at once, so that calls still on their way (in TCP's send
   * buffer while the network is partitioned) never reach the store later and
   * spend there after their callers got the failure mode's answer. Stores
   * without such connections omit it.
   */
  abandonCalls?(partition: string): void;
  close(): Promise<void>;
}
