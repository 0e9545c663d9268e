import type { Limit, LimitCall, LimitOutcome } from '@quota-service/core';
import type { CallsDecision } from '../../engine/decide-calls.js';
import type { QuotaEngine } from '../../engine/engine.js';
import type { Hits } from './rls-request.js';
import type { RlsDomain, RlsRule } from './rls-rules.js';

/** One descriptor's place in a Planned decision. */
export interface PlannedItem {
  index: number;
  rule: RlsRule;
  /** Its call's index in Planned.calls (descriptors with the same state share one call). */
  call: number;
  /** Can never pass: a rule of 0 requests, or more hits than its limit can ever grant. */
  never: boolean;
}

/** The calls of one all-or-nothing decision, built descriptor by descriptor. */
export class Planned {
  readonly items: PlannedItem[] = [];
  private readonly calls: LimitCall[] = [];
  /** Each call's index by the keys it touches; made when a second descriptor comes (one alone shares with nobody). */
  private byState: Map<string, number> | undefined;
  /** The calls were decided as checks of 1 (a descriptor could never pass). */
  private checked = false;

  add(index: number, rule: RlsRule, identityKey: string, hits: Hits): void {
    const limit = rule.limit!;
    // Descriptors whose calls would touch the same keys share one call, their hits added up: the same
    // descriptor sent twice, or limit overrides of one unit on the same entries (one counter, keyed as
    // envoyproxy/ratelimit keys it: entries and the unit's window). The call carries the strictest of
    // their limits, and each descriptor is judged against its own (outcomeOf). Overrides of different
    // units have keys, and calls, of their own.
    let call: number | undefined;
    if (this.calls.length > 0) {
      if (this.byState === undefined) {
        this.byState = new Map();
        for (let c = 0; c < this.calls.length; c++) this.byState.set(stateOf(this.calls[c]!.limit, this.calls[c]!.identityKey), c);
      }
      const state = stateOf(limit, identityKey);
      call = this.byState.get(state);
      if (call === undefined) this.byState.set(state, this.calls.length);
    }
    if (call === undefined) {
      call = this.calls.push({ limit, identityKey, cost: hits.cost, checkOnly: hits.checkOnly }) - 1;
    } else {
      const known = this.calls[call]!;
      const spent = (known.checkOnly ? 0 : known.cost) + (hits.checkOnly ? 0 : hits.cost);
      const strictest = capacityOf(limit) < capacityOf(known.limit) ? limit : known.limit;
      this.calls[call] = { limit: strictest, identityKey, cost: spent === 0 ? 1 : spent, checkOnly: spent === 0 };
    }
    this.items.push({ index, rule, call, never: false });
  }

  /**
   * An item's outcome, from its call's: the same when the call carries the
   * item's own limit, else read against the item's limit. Only fixed windows
   * share a call with another limit (overrides of one unit), so what the
   * counter holds is the call's capacity less its remaining. When the call
   * was denied nothing was spent, and the item is over only when the hits
   * decided do not fit its own limit either.
   */
  outcomeOf(item: PlannedItem, outcome: LimitOutcome | undefined): LimitOutcome | undefined {
    const call = this.calls[item.call]!;
    const own = item.rule.limit!;
    if (outcome === undefined || own === call.limit) return outcome;
    const count = capacityOf(call.limit) - outcome.remaining;
    const allowed = outcome.allowed || count + (this.checked ? 1 : call.cost) <= capacityOf(own);
    return { allowed, retryAfterMs: allowed ? 0 : outcome.retryAfterMs, remaining: capacityOf(own) - count, resetAfterMs: outcome.resetAfterMs };
  }

  /**
   * After a decision that spent nothing (some descriptor was over): the calls
   * of rules that spend when over, charged as asked; their statuses after the
   * charge, by call. None when there are no such calls, or when the store
   * could not take the charge (it is lost then, as an answer nobody reads
   * would be: the decision stands).
   */
  async chargeOver(engine: QuotaEngine, timeoutMs: number): Promise<Map<number, LimitOutcome> | undefined> {
    const chosen = [...new Set(this.items.filter((item) => item.rule.spendsWhenOver).map((item) => item.call))].filter((call) => !this.calls[call]!.checkOnly);
    if (chosen.length === 0) return undefined;
    const outcomes = await engine
      .chargeCalls(
        chosen.map((call) => this.calls[call]!),
        timeoutMs,
      )
      .catch(() => undefined);
    return outcomes === undefined ? undefined : new Map(chosen.map((call, i) => [call, outcomes[i]!]));
  }

  /**
   * One engine call for all; a descriptor that can never pass is asked only
   * for its status (a check of 1), and then nothing is spent at all.
   */
  decide(engine: QuotaEngine, domain: RlsDomain, timeoutMs: number): Promise<CallsDecision> | undefined {
    if (this.items.length === 0) return undefined;
    let checked = false;
    for (const item of this.items) {
      const own = item.rule.limit!;
      item.never = item.rule.blocks || own.algorithm.rejectCost(own.params, this.calls[item.call]!.cost) !== undefined;
      if (item.never) checked = true;
    }
    this.checked = checked;
    const calls = checked ? this.calls.map((call) => ({ ...call, cost: 1, checkOnly: true })) : this.calls;
    return engine.decideCalls(domain.policy, calls, timeoutMs);
  }
}

/** The keys a call of `limit` for `identityKey` touches, as one string: calls with the same are one call. */
function stateOf(limit: Limit, identityKey: string): string {
  return limit.algorithm.scriptKeys(identityKey, limit.params).join('\n');
}

/** What a limit grants when full: a fixed window's limit, a bucket's capacity. */
function capacityOf(limit: Limit): number {
  return limit.algorithm.capacity(limit.params);
}
