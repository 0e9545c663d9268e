/**
 * The domain's types, in one place: what a policy is, what one limit decides,
 * and what a request's decision says. The service, its embedded store and the
 * client's local limiter all speak these.
 */
import type { Algorithm } from './algorithms/algorithm.js';
import type { LimitOutcome } from './algorithms/outcome.js';
import type { FailureModeName, LimitDefinition } from './policies/policy-schema.js';
import type { SliceOptions } from './policies/slice-options.js';
import type { SliceAnswer } from './slices/slice-model.js';

export type { Algorithm, Decided } from './algorithms/algorithm.js';
export type { LimitOutcome } from './algorithms/outcome.js';

/**
 * Which parameters decided a limit for one identity (LimitStatus.applied),
 * numbered as quota.v1 ParameterSource: the first that exists wins, exact
 * override > wildcard override > plan > default. 0: not known (a service
 * that predates plans and overrides).
 */
export const PARAMETER_SOURCE = { unspecified: 0, default: 1, plan: 2, wildcardOverride: 3, exactOverride: 4 } as const;
export type ParameterSource = (typeof PARAMETER_SOURCE)[keyof typeof PARAMETER_SOURCE];

/** A limit ready for a decision: its algorithm with parsed parameters. */
export interface Limit<P = unknown> {
  readonly name: string;
  /** The identity part this limit counts per value of. */
  readonly keyBy: string;
  readonly algorithm: Algorithm<P>;
  readonly params: P;
  /** As written in the policy file, for ListPolicies. */
  readonly definition: LimitDefinition;
  /** Where `params` came from for the identity being decided; absent: the default. */
  readonly applied?: ParameterSource;
  /** The plan whose parameters `params` are (applied = plan). */
  readonly plan?: string;
  /** The identity part whose value picks one of `plans`. */
  readonly planBy?: string;
  /** This limit under each plan's parameters, by plan name (the value of the identity part planBy). */
  readonly plans?: ReadonlyMap<string, Limit<P>>;
  /** Holders may lease slices of this limit (the policy file's `slices`); absent: never. */
  readonly slices?: SliceOptions;
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
  /** Redis with runtime overrides: what the script checks this replica's view of them against. */
  guard?: OverrideGuard;
  /** A lease algorithm's limit (concurrency) with a request id: the lease's member (keys.ts leaseMember). */
  lease?: string;
  /**
   * On a store with hash slots (Redis Cluster): identityKey's slot, which the
   * store computes once and keeps here, since the call's routing and its slot
   * group both follow it. Absent: not computed yet.
   */
  slot?: number;
}

/**
 * A replica's view of the overrides that apply to one limit call, which the
 * decision script checks in the same atomic step as the decision: when the
 * store holds something else, the call fails as stale (nothing written), and
 * the service reads the overrides again and decides anew.
 */
export interface OverrideGuard {
  /** The generation of the prefix overrides this replica applies; the same for every call of a request. */
  readonly generation: number;
  /** Where the store keeps the generation, in the slot of identityKey. (The exact override's key is overrideKeyOf(identityKey).) */
  readonly generationKey: string;
  /** The stamp of the exact override this replica knows to be in force there; '' for none. */
  readonly stamp: string;
  /** When the prefix override this call applies expires (unix ms, store clock); 0 for none or never. */
  readonly wildcardExpiresAtMs: number;
}

/**
 * 'spend' writes when every limit allows; 'peek' decides and writes nothing;
 * 'check' decides and never spends; 'refund' gives back what a spend of the
 * same calls took; 'charge' spends each call's cost without checking (the
 * balance may go into debt, at most one capacity deep); 'settle' settles the
 * reservation remembered at the memo (DecideOptions.actualCost); 'release' and
 * 'renew' act on the lease of each lease limit (LimitCall.lease): each outcome's
 * `allowed` says whether it was held, the rest is its status as a peek reports it after the step.
 */
export type DecideMode = 'spend' | 'peek' | 'check' | 'refund' | 'charge' | 'settle' | 'release' | 'renew';

/** The outcomes of one all-or-nothing step and the time (unix ms, the store's clock) it decided at. */
export interface GroupDecision {
  outcomes: LimitOutcome[];
  nowMs: number;
  /** Idempotent Allow: the remembered decision of an earlier call with the same request id (nothing spent now). */
  replayed?: boolean;
  /** Replayed, but the earlier cross-slot call has not stored its decision yet. */
  pending?: boolean;
  /** Mode 'settle': what the reservation at the memo held and what became of it. */
  settlement?: Settlement;
  /** A slice step: what was taken and given back. */
  slice?: SliceAnswer;
}

/**
 * A reservation as mode 'settle' found it: 'unknown' (no such memo: never
 * reserved, expired, or another identity's), 'pending' (a cross-slot decision
 * not stored yet), 'denied' (its Allow was denied), 'settled' (settled before:
 * nothing written now) or 'applied' (settled by this call). The other fields
 * are set for 'settled' and 'applied' only.
 */
export interface Settlement {
  status: 'unknown' | 'pending' | 'denied' | 'settled' | 'applied';
  /** The reservation's cost. */
  estimate: number;
  /** The actual cost of the settlement that counts (the first). */
  actualCost: number;
  /** When each limit of the request spent its estimate (unix ms, store clock), in the policy's order. */
  spentAtMs: number[];
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
  /** Mode 'spend': answer a remembered decision, or remember this one; mode 'settle': the reservation. */
  memo?: Memo;
  /** Mode 'settle': what the work really cost. */
  actualCost?: number;
  /** Mode 'settle': the index, among the request's limits, of the first call's limit (its spend time is the group's). */
  memoIndex?: number;
}

/** One limit's status after a decision (AllowResponse.limits). */
export interface LimitStatus {
  name: string;
  algorithm: string;
  limit: number;
  remaining: number;
  resetAfterMs: number;
  /** Which parameters decided: a PARAMETER_SOURCE value (a newer service may send others). */
  applied: number;
  /** The plan whose parameters applied when applied is PARAMETER_SOURCE.plan; '' otherwise. */
  plan: string;
  /** A concurrency limit: the leases held now (`remaining` is the leases free); 0 for the other algorithms. */
  leasesHeld: number;
}

/**
 * Where a decision came from: 'store' = the shared store decided;
 * 'fail_open' / 'fail_closed' = the store could not be asked and the policy's
 * failure mode answered; 'local' = a per-process limit decided; 'slice' = the
 * holder decided from a slice it leased from the store (allowed, always).
 */
export type DecisionSource = 'store' | 'fail_open' | 'fail_closed' | 'local' | 'slice';

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
  /**
   * Allowed on a policy with a concurrency limit, by the store or the local
   * failure mode: the lease held for the request id expires this many ms
   * from now unless renewed or released. Absent (0) otherwise.
   */
  leaseExpiresInMs?: number;
  /**
   * Decided by the store on a policy with a concurrency limit: the leases of
   * its first concurrency limit's set that had expired without a release and
   * this decision dropped (metrics). Absent (0) otherwise; never sent to callers.
   */
  leasesExpired?: number;
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
