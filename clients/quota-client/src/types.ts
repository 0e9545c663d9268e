import type { ChannelCredentials, ChannelOptions, ClientMiddleware } from 'nice-grpc';
import type {
  AcquireParams,
  AllowParams,
  Clock,
  Decision,
  DecisionSource,
  Lease,
  LeaseRelease,
  LimitStatus,
  PolicySet,
  QuotaReservation as Reservation,
  ReserveParams,
  QuotaSettlement as Settlement,
  QuotaSettlementStatus as SettlementStatus,
} from '@quota-service/core';
import type { LeaseTimers } from './lease-timers.js';

/**
 * Where the client reports when the failure policy starts and stops answering:
 * a pino logger fits, as does any object with these two methods.
 */
export interface QuotaClientLogger {
  warn(fields: Record<string, unknown>, message: string): void;
  info(message: string): void;
}

/** One question to the quota service: may `identity` spend `cost` of `policy` now? */
export type { AllowParams };

/** One limit's status after a decision: name, algorithm, limit, remaining, resetAfterMs. */
export type QuotaLimitStatus = LimitStatus;

/**
 * Where a decision came from: 'store' = the service decided; 'fail_open' /
 * 'fail_closed' = the service could not be asked (unreachable, deadline
 * passed, store down) and the configured policy answered; 'local' = the
 * per-process emergency limit answered.
 */
export type { DecisionSource };

/**
 * The service's answer: allowed, retryAfterMs (an estimate, 0 when allowed),
 * deniedBy (the limit that rejected; '' when allowed or when no limit was
 * asked), limits (every limit's status; [] for fail_open / fail_closed),
 * delayMs (0 unless a shaping limit asks the caller to wait) and source.
 */
export type QuotaDecision = Decision;

export interface AllowOptions {
  /** This call's deadline in ms, instead of the client's `deadlineMs`. */
  deadlineMs?: number;
  /** Aborting rejects the call with the signal's reason (no failure policy applies). */
  signal?: AbortSignal;
}

/** A reservation and its settlement (reserve()), a concurrency lease (acquire()): the shapes @quota-service/core defines. */
export type { AcquireParams, Lease, LeaseRelease, Reservation, ReserveParams, Settlement, SettlementStatus, LeaseTimers };

/** What answers an acquire() the service cannot decide: a lease granted without the service is not counted anywhere. */
export type LeaseOnUnavailable = 'fail_open' | 'fail_closed';

export interface AcquireOptions extends AllowOptions {
  /** This call's answer when the service cannot decide, instead of the client's `leaseOnUnavailable`. */
  onUnavailable?: LeaseOnUnavailable;
}

export interface QuotaClient {
  allow(params: AllowParams, options?: AllowOptions): Promise<QuotaDecision>;
  /**
   * Reserves `estimate` units (an Allow with a request_id) for work whose real cost
   * is known only afterwards; settle the real cost on the handle. Follows the
   * client's deadline and `onUnavailable`, as allow() does.
   */
  reserve(params: ReserveParams, options?: AllowOptions): Promise<Reservation>;
  /**
   * Acquires a concurrency lease (an Allow with a request_id on a policy with a
   * `concurrency` limit). The lease renews itself while held; release it, or
   * dispose of it (`await using`). When the service cannot decide, the lease fails
   * closed unless `leaseOnUnavailable` (or this call's `onUnavailable`) says otherwise.
   */
  acquire(params: AcquireParams, options?: AcquireOptions): Promise<Lease>;
  /**
   * The names of the policies the service enforces (with caller authentication, those
   * this caller may use): for a start-up check that the policies an application names
   * exist. Rejects when the service cannot answer within the client's deadline.
   */
  listPolicies(options?: { deadlineMs?: number }): Promise<string[]>;
  /** Closes the channel; later allow() calls reject. Calls still in flight may get the failure policy's answer. */
  close(): Promise<void>;
}

/**
 * The emergency local limit: each process applies its own limits, decided by
 * the same algorithm models as the service's embedded store. Not a global
 * quota: with N replicas, give each 1/N of the global limit.
 */
export interface LocalLimitOptions {
  /**
   * The local limits, in the quota service's policy file format: YAML text,
   * or a PolicySet from parsePolicies() (@quota-service/core).
   * Parsed when the client is created, so a bad definition fails at startup.
   */
  policies: string | PolicySet;
  /** For a policy the local set does not define. Default 'fail_closed'. */
  otherwise?: 'fail_open' | 'fail_closed';
  /** The clock of the local models; default the system clock. */
  clock?: Clock;
}

export type OnUnavailable = 'fail_open' | 'fail_closed' | { local: LocalLimitOptions };

export interface BatchOptions {
  /**
   * How long the first queued call waits for others. 0: no wait; a call goes as
   * soon as the current turn's work is done, with the others made in that turn,
   * unless a batch is unanswered: then the calls of one turn go as a second
   * batch, and a call made alone rides the next, sent when a batch answers.
   */
  maxDelayMs: number;
  /** A batch is sent as soon as it holds this many calls (1..1000, the service's bound). */
  maxSize: number;
}

export interface QuotaClientOptions {
  /** host:port of the quota service, e.g. "127.0.0.1:50051". */
  address: string;
  /** Channel credentials; default insecure (plaintext), for loopback and meshes that add TLS. */
  credentials?: ChannelCredentials;
  /**
   * grpc-js channel options, e.g. round-robin over every address a name resolves to:
   * `{ 'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) }`
   * with `address: 'dns:///quota-service-headless.ns.svc:50051'` (docs/deploy.md). Default:
   * grpc-js's (pick_first: one connection, to one instance).
   */
  channelOptions?: ChannelOptions;
  /** Per-call deadline in ms; past it the failure policy answers. Default 250. */
  deadlineMs?: number;
  /** What answers when the service cannot: default 'fail_closed'. */
  onUnavailable?: OnUnavailable;
  /** retryAfterMs of a fail_closed decision. Default 1000. */
  failClosedRetryAfterMs?: number;
  /** Coalesce concurrent calls into batches; default { maxDelayMs: 0, maxSize: 100 }; false = one Allow per call. */
  batch?: BatchOptions | false;
  /**
   * Send the batches as messages of one long-lived AllowStream call (default
   * true), much cheaper per batch than a call each; false: one AllowBatch call
   * per batch (or Allow for a batch of one). Against a service without
   * AllowStream the client switches to AllowBatch by itself. A stream sticks
   * to one service instance: it is renewed after 60 s and after 5 s idle, so
   * a round_robin channel still spreads over time (docs/deploy.md).
   */
  stream?: boolean;
  /**
   * nice-grpc client middleware around every RPC (tracing, metrics): each
   * AllowStream, AllowBatch or Allow call. Without one, the batches' AllowStream
   * runs on grpc-js directly, which costs less per batch.
   */
  middleware?: ClientMiddleware;
  /** Warnings when the failure policy starts and stops answering. Default: silent. */
  logger?: QuotaClientLogger;
  /**
   * What answers acquire() when the service cannot decide. Default 'fail_closed':
   * a lease granted without the service is invisible to every other replica, so
   * the cap on work in progress would not hold. `onUnavailable` does not apply to
   * leases (a local limit cannot count another process's leases).
   */
  leaseOnUnavailable?: LeaseOnUnavailable;
  /** The clock and timers leases renew themselves by; default the system's. */
  leaseTimers?: LeaseTimers;
  /**
   * Decide hot identities' Allows from slices leased from the service, for
   * policies whose every limit has `slices` (docs/policies.md, "Slices"):
   * default true; false: every Allow asks the service.
   */
  slices?: boolean;
}
