/**
 * The domain's types, in one place: what a policy is, what one limit decides,
 * and what a request's decision says. The service, its embedded store and the
 * client's local limiter all speak these.
 */
import type { Algorithm } from './algorithms/algorithm.js';
import type { LimitOutcome } from './algorithms/outcome.js';
import type { FailureModeName, LimitDefinition } from './policies/policy-schema.js';

export type { Algorithm, Decided } from './algorithms/algorithm.js';
export type { LimitOutcome } from './algorithms/outcome.js';

/** A limit ready for a decision: its algorithm with parsed parameters. */
export interface Limit<P = unknown> {
  readonly name: string;
  /** The identity part this limit counts per value of. */
  readonly keyBy: string;
  readonly algorithm: Algorithm<P>;
  readonly params: P;
  /** As written in the policy file, for ListPolicies. */
  readonly definition: LimitDefinition;
}

/** What a policy does when the store cannot be asked in time. */
export interface FailureMode {
  /**
   * A policy file's mode, or 'error': the store's trouble reaches the caller
   * as an error (Envoy's rate limit service answers UNAVAILABLE, and the
   * proxy's own failure mode decides). Only the Envoy door uses 'error'.
   */
  readonly mode: FailureModeName | 'error';
  /** For mode local: the share of each limit one instance grants; 1 otherwise. */
  readonly localShare: number;
}

export interface Policy {
  readonly name: string;
  readonly description: string;
  readonly limits: readonly Limit[];
  readonly failure: FailureMode;
  /** How long a decision made with a request id is remembered (idempotent Allow). */
  readonly requestIdTtlMs: number;
}

export type PolicySet = ReadonlyMap<string, Policy>;

/** One limit of a request: which limit, whose key, how many units. */
export interface LimitCall {
  limit: Limit;
  identityKey: string;
  cost: number;
  /**
   * Decided at `cost` with the others, all or nothing, but never spent: a
   * check whether `cost` would pass now (Envoy's hits_addend 0). Its status
   * is reported as a peek would report it. Absent (the usual case): spent.
   */
  checkOnly?: boolean;
}

/**
 * 'spend' writes when every limit allows; 'peek' decides and writes nothing;
 * 'check' decides and never spends; 'refund' gives back what a spend of the
 * same calls took.
 */
export type DecideMode = 'spend' | 'peek' | 'check' | 'refund';

/** The outcomes of one all-or-nothing step and the time (unix ms, the store's clock) it decided at. */
export interface GroupDecision {
  outcomes: LimitOutcome[];
  nowMs: number;
  /** Idempotent Allow: the remembered decision of an earlier call with the same request id (nothing spent now). */
  replayed?: boolean;
  /** Replayed, but the earlier cross-slot call has not stored its decision yet. */
  pending?: boolean;
}

/** Where and how long a decision with a request id is remembered (docs/keys.md). */
export interface Memo {
  key: string;
  ttlMs: number;
  /** Store 'pending' now, the whole decision later (a cross-slot request's first group). */
  claim?: boolean;
  /** How many limits a remembered decision holds (the whole request's). */
  count: number;
}

export interface DecideOptions {
  /** Mode 'refund': the time the spend being undone ran at. */
  spentAtMs?: number;
  /** Mode 'spend': answer a remembered decision, or remember this one. */
  memo?: Memo;
}

/** One limit's status after a decision (AllowResponse.limits). */
export interface LimitStatus {
  name: string;
  algorithm: string;
  limit: number;
  remaining: number;
  resetAfterMs: number;
}

/**
 * Where a decision came from: 'store' = the shared store decided;
 * 'fail_open' / 'fail_closed' = the store could not be asked and the policy's
 * failure mode answered; 'local' = a per-process limit decided.
 */
export type DecisionSource = 'store' | 'fail_open' | 'fail_closed' | 'local';

export interface Decision {
  allowed: boolean;
  /** 0 when allowed. */
  retryAfterMs: number;
  /** The limit that rejected the request; '' when allowed. */
  deniedBy: string;
  limits: LimitStatus[];
  /** Shaping: wait this long before doing the allowed work; 0 otherwise. */
  delayMs: number;
  source: DecisionSource;
}

/** One question to a limiter: may `identity` spend `cost` of `policy` now? */
export interface AllowParams {
  /** Policy name, e.g. "orders". */
  policy: string;
  /** Authenticated identity parts, e.g. { user: '42', tenant: 'acme' }; never values the end client chose. */
  identity: Readonly<Record<string, string>>;
  /** Units to spend; unset or 0 means 1. */
  cost?: number;
  /** Idempotency key: a retry with the same id gets the first decision and spends nothing more. */
  requestId?: string;
}

/**
 * Anything that answers AllowParams with a decision: the quota client, or a
 * stand-in of the application's own. The HTTP and MCP guards need only this.
 */
export interface QuotaDecider {
  allow(params: AllowParams): Promise<Decision>;
}

/** A decision before anybody said where it came from. */
export type SourcelessDecision = Omit<Decision, 'source'>;
