import type { DecisionSource } from '@quota-service/core';
import { cellsAt, SOURCE_INDEX, SOURCES } from '../../metrics/decision-tally.js';

export type RequestCode = 'ok' | 'over_limit';
export type DescriptorResult = 'allowed' | 'over_limit' | 'shadow_over_limit' | 'unlimited';

const CODES: readonly RequestCode[] = ['ok', 'over_limit'];
/** A rule's cells: one per descriptor result, then its near-limit count. */
const RESULTS: readonly DescriptorResult[] = ['allowed', 'over_limit', 'shadow_over_limit', 'unlimited'];
const RESULT_INDEX: Readonly<Record<DescriptorResult, number>> = { allowed: 0, over_limit: 1, shadow_over_limit: 2, unlimited: 3 };
const NEAR_LIMIT = RESULTS.length;

/**
 * ShouldRateLimit's counts in plain numbers between two scrapes, handed to
 * its Prometheus counters (rls-metrics.ts) in one inc per label set when
 * they are scraped, as the quota service's decisions are
 * (src/metrics/decision-tally.ts): prom-client builds and checks a label key
 * on every inc, and a call counts several. Each drain empties its part, so a
 * domain or rule gone after a reload leaves nothing behind here.
 */
export class RlsTally {
  /** domain -> counts by code (ok, over_limit) x source. */
  private readonly requests = new Map<string, number[]>();
  /** domain -> rule label -> counts by result, then near limit. */
  private readonly rules = new Map<string, Map<string, number[]>>();

  request(domain: string, over: boolean, source: DecisionSource): void {
    let cells = this.requests.get(domain);
    if (cells === undefined) {
      cells = new Array<number>(CODES.length * SOURCES.length).fill(0);
      this.requests.set(domain, cells);
    }
    cells[(over ? SOURCES.length : 0) + SOURCE_INDEX[source]]!++;
  }

  descriptor(domain: string, rule: string, result: DescriptorResult, nearLimit: boolean): void {
    const cells = cellsAt(this.rules, domain, rule, RESULTS.length + 1);
    cells[RESULT_INDEX[result]]!++;
    if (nearLimit) cells[NEAR_LIMIT]!++;
  }

  drainRequests(each: (labels: { domain: string; code: RequestCode; source: DecisionSource }, count: number) => void): void {
    for (const [domain, cells] of this.requests) {
      for (let i = 0; i < cells.length; i++) {
        if (cells[i] !== 0) each({ domain, code: CODES[Math.floor(i / SOURCES.length)]!, source: SOURCES[i % SOURCES.length]! }, cells[i]!);
      }
    }
    this.requests.clear();
  }

  /** The descriptor counts and the near-limit counts, each drained (the other stays till its own drain). */
  drainDescriptors(each: (labels: { domain: string; rule: string; result: DescriptorResult }, count: number) => void): void {
    this.drainRules(0, NEAR_LIMIT, (domain, rule, i, count) => each({ domain, rule, result: RESULTS[i]! }, count));
  }

  drainNearLimit(each: (labels: { domain: string; rule: string }, count: number) => void): void {
    this.drainRules(NEAR_LIMIT, NEAR_LIMIT + 1, (domain, rule, _i, count) => each({ domain, rule }, count));
  }

  private drainRules(from: number, to: number, each: (domain: string, rule: string, index: number, count: number) => void): void {
    for (const [domain, byRule] of this.rules) {
      for (const [rule, cells] of byRule) {
        for (let i = from; i < to; i++) {
          if (cells[i] === 0) continue;
          each(domain, rule, i, cells[i]!);
          cells[i] = 0;
        }
        if (cells.every((count) => count === 0)) byRule.delete(rule);
      }
      if (byRule.size === 0) this.rules.delete(domain);
    }
  }
}
