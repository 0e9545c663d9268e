import { createHash } from 'node:crypto';
import { type Decision, type Limit, type LimitCall, type LimitOutcome, rlsDescriptorTag, rlsKeyPrefix, rlsStateKey, UNIT_MS } from '@quota-service/core';
import type { QuotaEngine } from '../../engine/engine.js';
import type { RateLimitRequest } from './envoy-codec.js';
import type { Entry } from './rls-match.js';
import { matchRule } from './rls-match.js';
import { hitsOf, overrideUnit, validateRlsRequest } from './rls-request.js';
import { type RlsConfig, type RlsDomain, type RlsRule, windowLimit } from './rls-rules.js';

/** What a descriptor came to, for the response (rls-response.ts) and the metrics. */
export type DescriptorVerdict =
  /** No rule: unknown domain, no match, or replaced by another descriptor's rule. */
  | { kind: 'none' }
  | { kind: 'unlimited'; rule: RlsRule; label: string }
  | {
      kind: 'limited';
      rule: RlsRule;
      /** The metrics' rule label: the rule's path, with detailed_metric its last entry's value too (`key_value`). */
      label: string;
      /** Over the limit (for a shadow rule: would have been). */
      over: boolean;
      shadow: boolean;
      /** The status the store reported; undefined when it did not decide (fail_open, fail_closed, or a rule that never grants). */
      outcome: LimitOutcome | undefined;
      /** When over: how long until it could pass. */
      retryAfterMs: number;
    };

export interface RlsDecision {
  domain: RlsDomain | undefined;
  verdicts: DescriptorVerdict[];
  /** Any enforced descriptor over its limit (before the global shadow switch). */
  over: boolean;
  /** Where the enforced descriptors' decision came from; 'store' when no store call was needed. */
  source: Decision['source'];
  /** For a fail_closed denial: the retry its decision carries. */
  retryAfterMs: number;
}

/** A hash tag holds at most this much of the descriptor as text; a longer one is hashed (docs/keys.md). */
const MAX_TAG_CHARS = 200;

/**
 * The rate limit decision of one request: validated, each descriptor matched
 * to a rule (or its own `limit` override), `replaces` applied, then every
 * enforced descriptor decided all or nothing in one engine call, and the
 * shadow ones beside it (never holding the others back). Nothing is spent
 * when any enforced descriptor is over, except on rules that spend when over
 * (`spend_when_over`): their hits are charged then, into debt if need be.
 * Quota-mode rules (`quota_mode`) are decided each on its own beside them:
 * one that fits spends, and they make the request OVER_LIMIT only when all
 * of them are over. `timeoutMs` is the store budget. `descriptorLimits` false: the descriptors'
 * own `limit` is ignored and the configured rules apply (a caller that is not
 * a gateway, src/api/envoy/rate-limit-service.ts).
 */
export async function decideRls(
  engine: QuotaEngine,
  config: RlsConfig,
  request: RateLimitRequest,
  timeoutMs: number,
  descriptorLimits = true,
): Promise<RlsDecision> {
  validateRlsRequest(request);
  const domain = config.domains.get(request.domain);
  const verdicts: DescriptorVerdict[] = request.descriptors.map(() => ({ kind: 'none' }));
  if (domain === undefined) return { domain, verdicts, over: false, source: 'store', retryAfterMs: 0 };

  const rules = request.descriptors.map((descriptor): RlsRule | undefined => {
    const matched = matchRule(domain.root, descriptor.entries);
    if (descriptor.limit === undefined || !descriptorLimits) return matched;
    // The override keeps the matched rule's spend_when_over: a charge after the response spends whatever limit the route set.
    return overrideRule(domain.name, descriptor.limit.requests_per_unit, overrideUnit(descriptor.limit.unit), matched?.spendsWhenOver === true);
  });
  // A rule some other matched rule replaces is dropped: its descriptor answers OK and spends nothing.
  const replaced = new Set(rules.flatMap((rule) => rule?.replaces ?? []));

  const enforced = new Planned();
  const shadowed = new Planned();
  // quota_mode rules: each decided on its own (a quota over its limit must not hold the others back).
  const quotas: Planned[] = [];
  rules.forEach((rule, i) => {
    if (rule === undefined || (rule.ownName !== undefined && replaced.has(rule.ownName))) return;
    if (rule.limit === undefined) {
      verdicts[i] = { kind: 'unlimited', rule, label: labelOf(rule, request.descriptors[i]!.entries) };
      return;
    }
    const plan = rule.shadow ? shadowed : rule.quota ? new Planned() : enforced;
    if (plan !== shadowed && plan !== enforced) quotas.push(plan);
    plan.add(i, rule, stateKey(rule, request.descriptors[i]!.entries), hitsOf(request, i));
  });

  const [main, shadow, quota] = await Promise.all([
    enforced.decide(engine, domain, timeoutMs),
    // The shadow rules' store trouble never turns into an error: they answer OK anyway.
    shadowed.decide(engine, domain, timeoutMs).catch(() => undefined),
    quotas.length === 0 ? undefined : Promise.all(quotas.map((plan) => plan.decide(engine, domain, timeoutMs))),
  ]);
  // The store decided and spent nothing (a descriptor was over, or could never pass): rules that spend when over are charged now.
  const spentNothing = main !== undefined && main.decision.source === 'store' && (!main.decision.allowed || enforced.items.some((item) => item.never));
  const charged = spentNothing ? await enforced.chargeOver(engine, timeoutMs) : undefined;
  let over = false;
  let quotasOver = 0;
  const retryAfterMs = 0;
  const groups: [Planned, Awaited<ReturnType<Planned['decide']>>, boolean][] = [
    [enforced, main, false],
    [shadowed, shadow, true],
  ];
  for (let q = 0; q < quotas.length; q++) groups.push([quotas[q]!, quota?.[q], false]);
  for (const [plan, result, shadowPlan] of groups) {
    for (const item of plan.items) {
      const outcome = plan.outcomeOf(item, result?.outcomes?.[item.call]);
      const source = result?.decision.source ?? 'store';
      const itemOver = item.never || (outcome === undefined ? source === 'fail_closed' : !outcome.allowed);
      const retry = item.never ? neverRetryMs(item.rule) : (outcome?.retryAfterMs ?? result?.decision.retryAfterMs ?? 0);
      const label = labelOf(item.rule, request.descriptors[item.index]!.entries);
      // Over or not as decided; a charged rule's status is the one after its charge.
      const status = (plan === enforced ? plan.outcomeOf(item, charged?.get(item.call)) : undefined) ?? outcome;
      verdicts[item.index] = {
        kind: 'limited',
        rule: item.rule,
        label,
        over: itemOver,
        shadow: shadowPlan,
        outcome: status,
        retryAfterMs: itemOver ? retry : 0,
      };
      if (itemOver && item.rule.quota && !shadowPlan) quotasOver++;
      else if (itemOver && !shadowPlan) over = true;
    }
  }
  // As envoyproxy/ratelimit: quota-mode descriptors make the request OVER_LIMIT only when all of them are over.
  if (quotas.length > 0 && quotasOver === quotas.length) over = true;
  const source = main?.decision.source ?? quota?.[0]?.decision.source ?? 'store';
  const closed = main?.decision.source === 'fail_closed' ? main : quota?.find((q) => q?.decision.source === 'fail_closed');
  return { domain, verdicts, over, source, retryAfterMs: closed === undefined ? retryAfterMs : (closed.decision.retryAfterMs ?? 0) };
}

interface PlannedItem {
  index: number;
  rule: RlsRule;
  /** Its call's index in Planned.calls (descriptors with the same state share one call). */
  call: number;
  /** Can never pass: a rule of 0 requests, or more hits than its limit can ever grant. */
  never: boolean;
}

/** The calls of one all-or-nothing decision, built descriptor by descriptor. */
class Planned {
  readonly items: PlannedItem[] = [];
  private readonly calls: LimitCall[] = [];
  private readonly byState = new Map<string, number>();
  /** The calls were decided as checks of 1 (a descriptor could never pass). */
  private checked = false;

  add(index: number, rule: RlsRule, identityKey: string, hits: { cost: number; checkOnly: boolean }): void {
    const limit = rule.limit!;
    // Descriptors whose calls would touch the same keys share one call, their hits added up: the same
    // descriptor sent twice, or limit overrides of one unit on the same entries (one counter, keyed as
    // envoyproxy/ratelimit keys it: entries and the unit's window). The call carries the strictest of
    // their limits, and each descriptor is judged against its own (outcomeOf). Overrides of different
    // units have keys, and calls, of their own.
    const state = limit.algorithm.scriptKeys(identityKey, limit.params).join('\n');
    let call = this.byState.get(state);
    if (call === undefined) {
      call = this.calls.push({ limit, identityKey, cost: hits.cost, checkOnly: hits.checkOnly }) - 1;
      this.byState.set(state, call);
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
  async decide(engine: QuotaEngine, domain: RlsDomain, timeoutMs: number) {
    if (this.items.length === 0) return undefined;
    for (const item of this.items) {
      const own = item.rule.limit!;
      item.never = item.rule.blocks || own.algorithm.rejectCost(own.params, this.calls[item.call]!.cost) !== undefined;
    }
    this.checked = this.items.some((item) => item.never);
    const calls = this.checked ? this.calls.map((call) => ({ ...call, cost: 1, checkOnly: true })) : this.calls;
    return engine.decideCalls(domain.policy, calls, timeoutMs);
  }
}

/** What a limit grants when full: a fixed window's limit, a bucket's capacity. */
function capacityOf(limit: Limit): number {
  return limit.algorithm.capacity(limit.params);
}

/**
 * The rule's metrics label (envoyproxy/ratelimit's stats key): with
 * detailed_metric, the last entry's value appended (unless that level shares
 * one counter: its wildcard value stays); with value_to_metric on a level
 * matched by a wildcard or by its key alone, that level carries the
 * request's value (`key_value`) in place of the file's.
 */
function labelOf(rule: RlsRule, entries: readonly Entry[]): string {
  if (rule.detailedMetric) {
    const last = entries.length - 1;
    return rule.shared?.[last] !== undefined ? rule.path : `${rule.path}_${entries[last]?.value ?? ''}`;
  }
  const levels = rule.metricLevels;
  if (levels === undefined) return rule.path;
  let label = '';
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i]!;
    const value = level.value !== undefined && !level.wildcard ? level.value : level.valueToMetric && !level.share ? entries[i]?.value : level.value;
    label += `${i === 0 ? '' : '.'}${level.key}${value === undefined ? '' : `_${value}`}`;
  }
  return label;
}

/** A rule of 0 requests per unit: retry at the next window, though it will deny then too. */
function neverRetryMs(rule: RlsRule): number {
  return untilWindowEndMs(rule) ?? 1000 - (Date.now() % 1000);
}

/**
 * For a fixed window rule: the time to the end of the current window
 * (aligned to the Unix epoch, as the store aligns it); undefined for the
 * other algorithms.
 */
export function untilWindowEndMs(rule: RlsRule): number | undefined {
  const limit = rule.limit;
  if (limit === undefined || limit.algorithm.name !== 'fixed_window') return undefined;
  const window = (limit.params as { window?: string | number }).window;
  const ms = typeof window === 'number' ? window : UNIT_MS[(window as keyof typeof UNIT_MS | undefined) ?? 'second'];
  return ms - (Date.now() % ms);
}

/**
 * A descriptor's `limit` (set by the proxy's route configuration): N per unit
 * for this request instead of the configured rule, counted per descriptor
 * and unit (envoyproxy/ratelimit does the same). Never a shadow; spends when
 * over when the rule the descriptor matches does (`spendsWhenOver`).
 */
function overrideRule(domain: string, requests: number, unit: keyof typeof UNIT_MS, spendsWhenOver: boolean): RlsRule {
  return {
    path: 'override',
    name: 'override',
    ownName: undefined,
    limit: windowLimit('override', requests, unit),
    blocks: requests === 0,
    replaces: [],
    shadow: false,
    quota: false,
    detailedMetric: false,
    metadata: undefined,
    shared: undefined,
    metricLevels: undefined,
    spendsWhenOver,
    report: { requestsPerUnit: requests, unit: UNIT_NUMBER[unit] },
    keyPrefix: rlsKeyPrefix(domain, 'override:fixed_window'),
  };
}

const UNIT_NUMBER = { second: 1, minute: 2, hour: 3, day: 4, month: 5, year: 6, week: 7 } as const;

/**
 * The state key of `rule` for one descriptor: the rule's prefix, then the
 * descriptor's entries in a hash tag (rlsDescriptorTag); beyond
 * MAX_TAG_CHARS, their SHA-256.
 */
export function stateKey(rule: RlsRule, entries: readonly Entry[]): string {
  const shared = rule.shared;
  // share_threshold: the wildcard value stands for every value it matches, so they count together.
  const counted = shared === undefined ? entries : entries.map((entry, i) => (shared[i] === undefined ? entry : { key: entry.key, value: shared[i] }));
  let tag = rlsDescriptorTag(counted);
  // `sha256:` cannot start an encoded tag: `:` is always percent-encoded there.
  if (tag.length > MAX_TAG_CHARS) tag = `sha256:${createHash('sha256').update(tag).digest('base64url')}`;
  return rlsStateKey(rule.keyPrefix, tag);
}
