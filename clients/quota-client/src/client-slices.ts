import { randomUUID } from 'node:crypto';
import {
  type AllowParams,
  type Decision,
  identityKey,
  type Limit,
  type LimitCall,
  type LimitStatus,
  PARAMETER_SOURCE,
  SliceHolder,
  type SliceTimers,
} from '@quota-service/core';
import type { LimitDefinition, Policy } from '@quota-service/contract';
import type { QuotaRpcClient } from './service-definition.js';

/** How often the client reads again which policies' limits have slices (ListPolicies). */
const POLICIES_REFRESH_MS = 30_000;

/** A limit with slices as the client knows it from ListPolicies: enough for its holder and its status. */
interface SlicedLimit {
  limit: Limit;
  capacity: number;
}

/** A policy whose every limit has slices, with the limit calls of the identities seen lately (their keys built once). */
interface SlicedPolicy {
  limits: readonly SlicedLimit[];
  calls: Map<string, ClientSliceCall[]>;
}

/** Identities per policy whose limit calls are kept; past it the policy's calls are dropped and built anew. */
const CALLS_KEPT = 10_000;

/** A limit call of the client's holder, with the request it came from: a slice is taken through that policy and identity. */
interface ClientSliceCall extends LimitCall {
  policy: string;
  identity: Readonly<Record<string, string>>;
}

/**
 * The quota client's slices (docs/policies.md, "Slices"): it learns from
 * ListPolicies which policies have slices on every limit, and for those its
 * holder takes slices through TakeSlice and decides hot identities' Allows
 * from them, without a call. Everything else goes to the service as before:
 * a request with a request id, a policy with a limit without slices or with
 * plans (the client cannot tell which plan applies), a cost the slice cannot
 * pay. A policy list not read yet means no slices.
 */
export class ClientSlices {
  readonly holder: SliceHolder;
  private policies = new Map<string, SlicedPolicy>();
  private readonly refreshTimer: ReturnType<typeof setInterval>;
  private reading = false;

  constructor(
    private readonly client: QuotaRpcClient,
    private readonly deadlineMs: number,
    timers?: SliceTimers,
  ) {
    const holder = `client:${randomUUID()}`;
    this.holder = new SliceHolder(
      {
        slice: (call, op, giveBack) => {
          const { policy, identity } = call as ClientSliceCall;
          return client
            .takeSlice(
              { policy, identity, limit: call.limit.name, holder, giveBack, giveBackOnly: op === 'give-back' },
              { signal: AbortSignal.timeout(deadlineMs) },
            )
            .then((answer) => ({ ...answer, nowMs: 0 }));
        },
      },
      timers === undefined ? {} : { timers },
    );
    this.refresh();
    this.refreshTimer = setInterval(() => this.refresh(), POLICIES_REFRESH_MS);
    this.refreshTimer.unref();
  }

  /** A decision from slices (allowed, source 'slice'), or undefined: ask the service. */
  decide(params: AllowParams): Decision | undefined {
    if (params.requestId !== undefined && params.requestId !== '') return undefined;
    const policy = this.policies.get(params.policy);
    if (policy === undefined) return undefined;
    const cost = params.cost === undefined || params.cost === 0 ? 1 : params.cost;
    if (!(cost > 0) || !Number.isFinite(cost)) return undefined;
    const calls = callsOf(policy, params);
    if (calls === undefined) return undefined;
    // The holder reads a call's cost only while it decides: the kept calls take this request's.
    for (const call of calls) call.cost = cost;
    const limits = policy.limits;
    const outcomes = this.holder.decide(calls);
    if (outcomes === undefined) return undefined;
    const statuses: LimitStatus[] = limits.map(({ limit, capacity }, i) => ({
      name: limit.name,
      algorithm: limit.algorithm.name,
      limit: capacity,
      remaining: outcomes[i]!.remaining,
      resetAfterMs: 0,
      applied: PARAMETER_SOURCE.default,
      plan: '',
      leasesHeld: 0,
    }));
    return { allowed: true, retryAfterMs: 0, deniedBy: '', limits: statuses, delayMs: 0, source: 'slice' };
  }

  /**
   * The takes on their way for the identity of a request `decide` could not
   * answer, or undefined: ask the service now. Once they are in, `decide` may
   * answer it after all.
   */
  taking(params: AllowParams): Promise<unknown> | undefined {
    const policy = this.policies.get(params.policy);
    const calls = policy === undefined ? undefined : callsOf(policy, params);
    return calls === undefined ? undefined : this.holder.taking(calls);
  }

  /**
   * Whether a decision from slices should be answered on the next turn of the
   * event loop: while a take is on its way, so that a caller whose every call
   * is answered from slices (one that spins on them) lets the take's answer in.
   */
  answerNextTurn(): boolean {
    return this.holder.calling();
  }

  /** Gives every slice's unused units back. */
  close(): Promise<void> {
    clearInterval(this.refreshTimer);
    return this.holder.close();
  }

  /** Reads the policies in the background (at start, then every POLICIES_REFRESH_MS); a failure keeps what was read. */
  private refresh(): void {
    if (this.reading) return;
    this.reading = true;
    this.client
      .listPolicies({}, { signal: AbortSignal.timeout(this.deadlineMs * 4) })
      .then(
        ({ policies }) => {
          this.policies = slicedPolicies(policies);
        },
        () => {},
      )
      .finally(() => {
        this.reading = false;
      });
  }
}

/** The limit calls of a request's identity under a sliced policy (kept per identity), or undefined when it lacks a part a limit is keyed by. */
function callsOf(policy: SlicedPolicy, params: AllowParams): ClientSliceCall[] | undefined {
  const { limits } = policy;
  let id = '';
  for (let i = 0; i < limits.length; i++) {
    const value = params.identity[limits[i]!.limit.keyBy];
    if (value === undefined || value === '') return undefined;
    id = i === 0 ? value : `${id}\u0000${value}`;
  }
  let calls = policy.calls.get(id);
  if (calls === undefined) {
    if (policy.calls.size >= CALLS_KEPT) policy.calls.clear();
    // A copy: the caller may change its object later, and the slices of this key must be taken for this identity.
    const identity = { ...params.identity };
    calls = limits.map(({ limit }) => ({
      limit,
      identityKey: identityKey(limit.name, limit.keyBy, identity[limit.keyBy]!),
      cost: 1,
      policy: params.policy,
      identity,
    }));
    policy.calls.set(id, calls);
  }
  return calls;
}

/** The policies whose every limit has slices (and no plans), with those limits. */
function slicedPolicies(policies: readonly Policy[]): Map<string, SlicedPolicy> {
  const out = new Map<string, SlicedPolicy>();
  for (const policy of policies) {
    const limits = policy.limits.map(slicedLimit);
    if (limits.length > 0 && limits.every((limit) => limit !== undefined)) out.set(policy.name, { limits: limits as SlicedLimit[], calls: new Map() });
  }
  return out;
}

function slicedLimit(definition: LimitDefinition): SlicedLimit | undefined {
  const slices = definition.slices;
  if (slices === undefined || definition.planBy !== '') return undefined;
  const [algorithm, capacity] =
    definition.tokenBucket !== undefined
      ? ['token_bucket', definition.tokenBucket.capacity]
      : definition.gcra !== undefined
        ? ['gcra', definition.gcra.capacity]
        : definition.fixedWindow !== undefined
          ? ['fixed_window', definition.fixedWindow.limit]
          : [undefined, 0];
  if (algorithm === undefined) return undefined;
  // Only what the holder reads: the name, the identity part, the slices; the service keeps the parameters.
  const limit = {
    name: definition.name,
    keyBy: definition.keyBy,
    algorithm: { name: algorithm },
    params: undefined,
    definition: undefined,
    slices: { share: slices.share, maxUnits: slices.maxUnits, ttlMs: slices.ttlMs },
  } as unknown as Limit;
  return { limit, capacity };
}
