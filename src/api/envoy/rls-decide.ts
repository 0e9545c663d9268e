import { createHash } from 'node:crypto';
import { type Decision, type LimitOutcome, rlsDescriptorTag, rlsKeyPrefix, rlsStateKey, UNIT_MS } from '@quota-service/core';
import type { QuotaEngine } from '../../engine/engine.js';
import type { CallsDecision } from '../../engine/decide-calls.js';
import { Planned } from './rls-plan.js';
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
  const descriptors = request.descriptors;
  const domain = config.domains.get(request.domain);
  const verdicts = new Array<DescriptorVerdict>(descriptors.length).fill(NO_RULE);
  if (domain === undefined) return { domain, verdicts, over: false, source: 'store', retryAfterMs: 0 };

  const rules = new Array<RlsRule | undefined>(descriptors.length);
  let replaced: Set<string> | undefined;
  for (let i = 0; i < descriptors.length; i++) {
    const descriptor = descriptors[i]!;
    const matched = matchRule(domain.root, descriptor.entries);
    // The override keeps the matched rule's spend_when_over: a charge after the response spends whatever limit the route set.
    const rule =
      descriptor.limit === undefined || !descriptorLimits
        ? matched
        : overrideRule(domain.name, descriptor.limit.requests_per_unit, overrideUnit(descriptor.limit.unit), matched?.spendsWhenOver === true);
    rules[i] = rule;
    if (rule !== undefined && rule.replaces.length > 0) {
      replaced ??= new Set();
      for (const name of rule.replaces) replaced.add(name);
    }
  }

  const enforced = new Planned();
  let shadowed: Planned | undefined;
  // quota_mode rules: each decided on its own (a quota over its limit must not hold the others back).
  let quotas: Planned[] | undefined;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i];
    // A rule some other matched rule replaces is dropped: its descriptor answers OK and spends nothing.
    if (rule === undefined || (rule.ownName !== undefined && replaced?.has(rule.ownName) === true)) continue;
    if (rule.limit === undefined) {
      verdicts[i] = { kind: 'unlimited', rule, label: labelOf(rule, descriptors[i]!.entries) };
      continue;
    }
    let plan = enforced;
    if (rule.shadow) {
      shadowed ??= new Planned();
      plan = shadowed;
    } else if (rule.quota) {
      plan = new Planned();
      quotas ??= [];
      quotas.push(plan);
    }
    plan.add(i, rule, stateKey(rule, descriptors[i]!.entries), hitsOf(request, i));
  }

  // The enforced rules alone (the usual request) wait for their one decision, not for a Promise.all.
  const main = enforced.decide(engine, domain, timeoutMs);
  const [decided, shadow, quota] =
    shadowed === undefined && quotas === undefined
      ? [await main, undefined, undefined]
      : await Promise.all([
          main,
          // The shadow rules' store trouble never turns into an error: they answer OK anyway.
          shadowed?.decide(engine, domain, timeoutMs)?.catch(() => undefined),
          quotas === undefined ? undefined : Promise.all(quotas.map((plan) => plan.decide(engine, domain, timeoutMs))),
        ]);
  // The store decided and spent nothing (a descriptor was over, or could never pass): rules that spend when over are charged now.
  const spentNothing = decided !== undefined && decided.decision.source === 'store' && (!decided.decision.allowed || enforced.items.some((item) => item.never));
  const charged = spentNothing ? await enforced.chargeOver(engine, timeoutMs) : undefined;

  const judged = new Verdicts(request, verdicts);
  judged.add(enforced, decided, false, charged);
  if (shadowed !== undefined) judged.add(shadowed, shadow, true, undefined);
  if (quotas !== undefined) for (let q = 0; q < quotas.length; q++) judged.add(quotas[q]!, quota?.[q], false, undefined);
  let over = judged.over;
  // As envoyproxy/ratelimit: quota-mode descriptors make the request OVER_LIMIT only when all of them are over.
  if (quotas !== undefined && judged.quotasOver === quotas.length) over = true;
  const source = decided?.decision.source ?? quota?.[0]?.decision.source ?? 'store';
  const closed = decided?.decision.source === 'fail_closed' ? decided : quota?.find((q) => q?.decision.source === 'fail_closed');
  return { domain, verdicts, over, source, retryAfterMs: closed === undefined ? 0 : (closed.decision.retryAfterMs ?? 0) };
}

/** The verdict of a descriptor no rule applies to (shared: a verdict is never changed once made). */
const NO_RULE: DescriptorVerdict = Object.freeze({ kind: 'none' });

/** Each planned descriptor's verdict, written into `verdicts` plan by plan; whether an enforced one, and how many quotas, are over. */
class Verdicts {
  over = false;
  quotasOver = 0;

  constructor(
    private readonly request: RateLimitRequest,
    private readonly verdicts: DescriptorVerdict[],
  ) {}

  /** `charged`: the statuses after a charge of rules that spend when over (the enforced plan only). */
  add(plan: Planned, result: CallsDecision | undefined, shadow: boolean, charged: Map<number, LimitOutcome> | undefined): void {
    for (const item of plan.items) {
      const outcome = plan.outcomeOf(item, result?.outcomes?.[item.call]);
      const source = result?.decision.source ?? 'store';
      const itemOver = item.never || (outcome === undefined ? source === 'fail_closed' : !outcome.allowed);
      const retry = item.never ? neverRetryMs(item.rule) : (outcome?.retryAfterMs ?? result?.decision.retryAfterMs ?? 0);
      // Over or not as decided; a charged rule's status is the one after its charge.
      const status = (charged === undefined ? undefined : plan.outcomeOf(item, charged.get(item.call))) ?? outcome;
      this.verdicts[item.index] = {
        kind: 'limited',
        rule: item.rule,
        label: labelOf(item.rule, this.request.descriptors[item.index]!.entries),
        over: itemOver,
        shadow,
        outcome: status,
        retryAfterMs: itemOver ? retry : 0,
      };
      if (itemOver && item.rule.quota && !shadow) this.quotasOver++;
      else if (itemOver && !shadow) this.over = true;
    }
  }
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
