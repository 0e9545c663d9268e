import { ServerError, Status, type CallContext } from 'nice-grpc';
import type { QuotaEngine } from '../../engine/engine.js';
import type { Logger } from '../../logger.js';
import type { DenialLog } from '../../engine/denial-log.js';
import type { RateLimitRequest, RateLimitResponse } from './envoy-codec.js';
import { decideRls, type RlsDecision } from './rls-decide.js';
import { rateLimitResponse } from './rls-response.js';
import type { RlsConfig } from './rls-rules.js';
import type { Admission } from '../../grpc/admission.js';
import type { CallerContext } from '../../grpc/auth-middleware.js';
import { callDeadlineOf } from '../../grpc/call-deadline.js';

export interface RateLimitServiceOptions {
  /**
   * The store budget of this API for a caller that sends no deadline
   * (QUOTA_RLS_STORE_TIMEOUT_MS); a caller's deadline sets its own (storeBudgetMs).
   */
  timeoutMs: number;
  /** The global shadow switch (QUOTA_RLS_SHADOW_MODE): every answer OK, what was over still counted. */
  shadowMode: boolean;
  /** RateLimit / RateLimit-Policy headers in response_headers_to_add (QUOTA_RLS_RATELIMIT_HEADERS). */
  rateLimitHeaders: boolean;
  /** Told of every decision and how long it took (metrics). */
  onDecision?: (decision: RlsDecision, seconds: number) => void;
}

/**
 * envoy.service.ratelimit.v3.RateLimitService: ShouldRateLimit on the same
 * engine as QuotaService. `config` is read once per call, so a reload is seen
 * whole or not at all. Each call takes one place of the admission bounds.
 *
 * A descriptor's `limit` replaces the configured rule: a proxy sets it from its
 * route configuration. With caller authentication it is honoured only for a
 * caller with the `gateway` role; any other caller's is ignored (the
 * configured rules apply) and logged once per caller. Without caller
 * authentication it is honoured, as before authentication existed.
 */
export function rateLimitService(engine: QuotaEngine, config: () => RlsConfig, admission: Admission, logger: Logger, options: RateLimitServiceOptions) {
  // Callers already told that their descriptor limits are ignored: one warning each, not one per call.
  const warned = new Set<string>();
  return {
    async shouldRateLimit(request: RateLimitRequest, context: CallContext & CallerContext): Promise<RateLimitResponse> {
      const allowed = context.caller?.domains;
      if (context.caller !== undefined && allowed !== undefined && !allowed.has(request.domain)) {
        throw new ServerError(Status.PERMISSION_DENIED, `caller "${context.caller.name}" may not use domain ${JSON.stringify(request.domain.slice(0, 64))}`);
      }
      const release = admission.admit(context, 1);
      const started = performance.now();
      try {
        const caller = context.caller;
        const descriptorLimits = caller === undefined || caller.roles.has('gateway');
        if (!descriptorLimits && !warned.has(caller.name) && hasDescriptorLimit(request)) {
          warned.add(caller.name);
          logger.warn(
            { caller: caller.name, domain: request.domain },
            `caller ${caller.name} sent descriptors with their own limit, which only a gateway may set: they are ignored and the configured rules apply (give a proxy roles: [gateway] in the callers file)`,
          );
        }
        const deadline = callDeadlineOf(context.metadata);
        const timeoutMs = deadline === undefined ? options.timeoutMs : storeBudgetMs(deadline - Date.now());
        const decision = await decideRls(engine, config(), request, timeoutMs, descriptorLimits);
        options.onDecision?.(decision, (performance.now() - started) / 1000);
        if (decision.over && !options.shadowMode && engine.denials !== undefined) logDenial(engine.denials, request, decision);
        if (decision.over && logger.isLevelEnabled('debug')) {
          const rules = decision.verdicts.flatMap((v, index) => (v.kind === 'limited' && v.over ? [{ index, rule: v.rule.path, shadow: v.shadow }] : []));
          logger.debug({ domain: request.domain, rules, source: decision.source, shadowMode: options.shadowMode }, 'rate limit over');
        }
        return rateLimitResponse(decision, options);
      } finally {
        release();
      }
    },
  };
}

/**
 * The denial on the denial log: the domain's policy (`rls:<domain>`), the first
 * enforced descriptor over its limit (its rule's path as `deniedBy`, its
 * entries as the identity, digested there).
 */
function logDenial(denials: DenialLog, request: RateLimitRequest, decision: RlsDecision): void {
  const index = decision.verdicts.findIndex((v) => v.kind === 'limited' && v.over && !v.shadow);
  const verdict = decision.verdicts[index];
  const identity: Record<string, string> = {};
  for (const entry of request.descriptors[index]?.entries ?? []) identity[entry.key] = entry.value;
  const policy = decision.domain?.policy.name ?? `rls:${request.domain}`;
  denials.denied('ShouldRateLimit', policy, verdict?.kind === 'limited' ? verdict.rule.path : '', decision.source, identity);
}

/** The longest store budget a caller's deadline gives (ms): past it, a silent store is not worth waiting for. */
export const MAX_CALLER_BUDGET_MS = 1000;

/**
 * The store budget of a call whose caller waits `remainingMs` more: that
 * time less a margin for the answer to reach it (25%, at least 4 ms), in
 * whole ms from 1 to MAX_CALLER_BUDGET_MS. Envoy's default 20 ms timeout
 * gives 15 ms, less what the call already spent.
 */
export function storeBudgetMs(remainingMs: number): number {
  const margin = Math.max(4, Math.ceil(remainingMs * 0.25));
  return Math.min(MAX_CALLER_BUDGET_MS, Math.max(1, Math.floor(remainingMs - margin)));
}

/** Whether any descriptor carries its own limit (a plain loop: it runs on calls of callers that are not gateways). */
function hasDescriptorLimit(request: RateLimitRequest): boolean {
  for (const descriptor of request.descriptors) if (descriptor.limit !== undefined) return true;
  return false;
}
