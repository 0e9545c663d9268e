import { Counter, type Registry } from 'prom-client';
import type { RlsDecision } from './rls-decide.js';
import { LatencyHistogram } from '../../metrics/latency-histogram.js';
import { RlsTally } from './rls-tally.js';

/**
 * The metrics of Envoy's rate limit service, beside the quota service's own
 * (src/metrics/metrics.ts) and in their style. Label values come from the
 * configuration (domains, rules), never from a request: a request for an
 * unknown domain counts under domain "" (a rule with detailed_metric adds
 * its last entry's value, as envoyproxy/ratelimit does: use it only where
 * the values are few).
 */
export class RlsMetrics {
  /** Counted per call, handed to the three counters below when they are scraped (rls-tally.ts). */
  private readonly tally = new RlsTally();
  private readonly requests: Counter<'domain' | 'code' | 'source'>;
  private readonly descriptors: Counter<'domain' | 'rule' | 'result'>;
  private readonly nearLimit: Counter<'domain' | 'rule'>;
  private readonly reloads: Counter<'result'>;
  private readonly duration: LatencyHistogram;

  constructor(
    registry: Registry,
    /** A limit at or past this share of its capacity after an allowed request counts as near it (QUOTA_RLS_NEAR_LIMIT_RATIO). */
    private readonly nearLimitRatio = 0.8,
  ) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'quota_rls_requests_total',
      help: 'ShouldRateLimit calls by domain ("" when not configured), code (ok, over_limit; the global shadow switch still counts over_limit) and source (store, fail_open, fail_closed, local).',
      labelNames: ['domain', 'code', 'source'] as const,
      registers,
      collect: () => this.tally.drainRequests((labels, count) => this.requests.inc(labels, count)),
    });
    this.descriptors = new Counter({
      name: 'quota_rls_descriptors_total',
      help: 'Descriptors that matched a rule, by domain, rule (its key path, as envoyproxy/ratelimit names it) and result: allowed, over_limit, shadow_over_limit (a shadow rule that would have denied; answered OK) or unlimited.',
      labelNames: ['domain', 'rule', 'result'] as const,
      registers,
      collect: () => this.tally.drainDescriptors((labels, count) => this.descriptors.inc(labels, count)),
    });
    this.nearLimit = new Counter({
      name: 'quota_rls_near_limit_total',
      help: 'Allowed descriptors whose limit was, after them, used up to at least QUOTA_RLS_NEAR_LIMIT_RATIO of its capacity, by domain and rule.',
      labelNames: ['domain', 'rule'] as const,
      registers,
      collect: () => this.tally.drainNearLimit((labels, count) => this.nearLimit.inc(labels, count)),
    });
    this.reloads = new Counter({
      name: 'quota_rls_config_reloads_total',
      help: 'Rate limit configuration reloads by result (success, failure: the loaded configuration stays in force).',
      labelNames: ['result'] as const,
      registers,
    });
    for (const result of ['success', 'failure']) this.reloads.inc({ result }, 0);
    this.duration = new LatencyHistogram({
      name: 'quota_rls_check_duration_seconds',
      help: 'Time to decide one ShouldRateLimit call inside the service (store call or failure mode included), by source.',
      labelName: 'source',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.05, 0.1],
      registers,
    });
  }

  decided(decision: RlsDecision, seconds: number): void {
    const domain = decision.domain?.name ?? '';
    this.tally.request(domain, decision.over, decision.source);
    this.duration.observe(decision.source, seconds);
    if (decision.domain === undefined) return;
    for (const verdict of decision.verdicts) {
      if (verdict.kind === 'none') continue;
      if (verdict.kind === 'unlimited') {
        this.tally.descriptor(domain, verdict.label, 'unlimited', false);
        continue;
      }
      const result = verdict.over ? (verdict.shadow ? 'shadow_over_limit' : 'over_limit') : 'allowed';
      this.tally.descriptor(domain, verdict.label, result, !verdict.over && this.nearItsLimit(verdict));
    }
  }

  /** After an allowed request, its limit used up to at least nearLimitRatio of its capacity. */
  private nearItsLimit(verdict: Extract<RlsDecision['verdicts'][number], { kind: 'limited' }>): boolean {
    const outcome = verdict.outcome;
    if (outcome === undefined) return false;
    const limit = verdict.rule.limit!;
    const capacity = limit.algorithm.capacity(limit.params);
    return capacity - outcome.remaining >= capacity * this.nearLimitRatio;
  }

  reloaded(success: boolean): void {
    this.reloads.inc({ result: success ? 'success' : 'failure' });
  }
}
