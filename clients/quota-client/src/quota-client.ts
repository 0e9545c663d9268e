import { randomUUID } from 'node:crypto';
import { Client as GrpcClient } from '@grpc/grpc-js';
import { ChannelCredentials, ClientError, createChannel, createClientFactory, Status } from 'nice-grpc';
import { DecisionSource as ProtoDecisionSource, type AllowResponse } from '@quota-service/contract';
import { Batcher, unarySender, type Send } from './batcher.js';
import { checkDeadlineMs, DeadlineExceeded } from './call-deadline.js';
import { ClientSlices } from './client-slices.js';
import { requestError } from './errors.js';
import { createFallback, type Fallback } from './fallback.js';
import { LeaseHandle } from './lease.js';
import { systemLeaseTimers } from './lease-timers.js';
import { ReservationHandle } from './reservation.js';
import { allowRequest, quotaClientDefinition } from './service-definition.js';
import { grpcJsStream } from './stream-call.js';
import { nextTurn, waitAtMost } from './waiting.js';
import type {
  AcquireOptions,
  AcquireParams,
  AllowOptions,
  AllowParams,
  DecisionSource,
  Lease,
  QuotaClient,
  QuotaClientOptions,
  QuotaDecision,
  Reservation,
  ReserveParams,
} from './types.js';

export const DEFAULT_DEADLINE_MS = 250;
export const DEFAULT_BATCH = { maxDelayMs: 0, maxSize: 100 } as const;
/** The service rejects bigger batches (src/api/quota/quota-service.ts MAX_BATCH_SIZE). */
const MAX_BATCH_SIZE = 1000;

/**
 * A client of quota.v1.QuotaService for code that sits in front of business
 * logic. Every call has a deadline; when the service cannot answer in time
 * (unreachable, deadline passed, its store down) the `onUnavailable` policy
 * answers and `source` says so. Caller bugs (bad input, unknown policy) reject
 * with a QuotaRequestError instead and never fail open. A service that sheds
 * load (RESOURCE_EXHAUSTED) is answered as a denial with its retry hint
 * (source 'fail_closed'), whatever `onUnavailable` says: overload never grants.
 */
export function createQuotaClient(options: QuotaClientOptions): QuotaClient {
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  if (!(deadlineMs > 0)) throw new RangeError(`deadlineMs must be > 0, got ${deadlineMs}`);
  const batch = options.batch === undefined ? DEFAULT_BATCH : options.batch;
  if (batch !== false) {
    if (!Number.isInteger(batch.maxSize) || batch.maxSize < 1 || batch.maxSize > MAX_BATCH_SIZE) {
      throw new RangeError(`batch.maxSize must be an integer from 1 to ${MAX_BATCH_SIZE}, got ${batch.maxSize}`);
    }
    if (!(batch.maxDelayMs >= 0)) throw new RangeError(`batch.maxDelayMs must be >= 0, got ${batch.maxDelayMs}`);
  }
  const failClosedRetryAfterMs = options.failClosedRetryAfterMs ?? 1_000;
  const fallback = createFallback(options.onUnavailable ?? 'fail_closed', failClosedRetryAfterMs);
  const leaseFallbacks = { fail_open: createFallback('fail_open', failClosedRetryAfterMs), fail_closed: createFallback('fail_closed', failClosedRetryAfterMs) };
  const leaseOnUnavailable = options.leaseOnUnavailable ?? 'fail_closed';
  if (leaseOnUnavailable !== 'fail_open' && leaseOnUnavailable !== 'fail_closed') {
    throw new RangeError(`leaseOnUnavailable must be 'fail_open' or 'fail_closed', got ${String(leaseOnUnavailable)}`);
  }
  const logger = options.logger;
  const leaseTimers = options.leaseTimers ?? systemLeaseTimers;

  const channelCredentials = options.credentials ?? ChannelCredentials.createInsecure();
  const channel = createChannel(options.address, channelCredentials, options.channelOptions);
  // Connect now rather than on the first call, so that call does not spend
  // its whole deadline on TCP and HTTP/2 setup.
  channel.getConnectivityState(true);
  const factory = options.middleware === undefined ? createClientFactory() : createClientFactory().use(options.middleware);
  const client = factory.create(quotaClientDefinition, channel);
  // Without a middleware to run, the batches' stream goes on grpc-js directly (on the same channel).
  const openStream =
    options.middleware === undefined ? grpcJsStream(new GrpcClient(options.address, channelCredentials, { channelOverride: channel })) : undefined;
  const batcher = batch === false ? undefined : new Batcher(client, { ...batch, stream: options.stream ?? true, openStream });
  const send: Send = batcher?.send ?? unarySender(client);
  const slices = options.slices === false ? undefined : new ClientSlices(client, deadlineMs);

  let closed = false;
  // Log transitions only: during an outage every call falls back, one line each would flood.
  let degraded = false;

  async function allow(params: AllowParams, callOptions: AllowOptions = {}): Promise<QuotaDecision> {
    if (closed) throw new Error('quota client is closed');
    let callDeadlineMs = callOptions.deadlineMs ?? deadlineMs;
    checkDeadlineMs(callDeadlineMs);
    const signal = callOptions.signal;
    if (slices !== undefined) {
      const sliced = slices.decide(params);
      if (sliced !== undefined) {
        if (slices.answerNextTurn()) await nextTurn();
        return sliced;
      }
      const taking = slices.taking(params);
      if (taking !== undefined) {
        // A take of this identity is on its way: wait for it (within the call's
        // deadline) rather than ask the service what the new slice will answer.
        const waitedMs = await waitAtMost(taking, callDeadlineMs, signal);
        const afterTake = slices.decide(params);
        if (afterTake !== undefined) return afterTake;
        callDeadlineMs = Math.max(1, callDeadlineMs - waitedMs);
      }
    }
    const request = allowRequest(params);
    let response: AllowResponse;
    try {
      response = await send(request, callDeadlineMs, signal);
    } catch (error) {
      return failed(error, signal, params, fallback);
    }
    answering();
    return toDecision(response);
  }

  /** The service could not answer: a caller bug or abort rejects; overload denies; anything else is the failure policy's. */
  function failed(error: unknown, signal: AbortSignal | undefined, params: AllowParams, answer: Fallback): Promise<QuotaDecision> {
    if (signal?.aborted) throw signal.reason;
    if (error instanceof ClientError) {
      const typed = requestError(error.code, error.details);
      if (typed !== undefined) throw typed;
      // The service is up and shedding load: "not now", never the failure policy's grant.
      if (error.code === Status.RESOURCE_EXHAUSTED) return Promise.resolve(overloaded(error.details));
    }
    unavailable(error);
    return answer(params);
  }

  function unavailable(error: unknown): void {
    if (!degraded) {
      degraded = true;
      logger?.warn({ reason: describe(error) }, 'quota service unavailable: the failure policy answers');
    }
  }

  function answering(): void {
    if (degraded) {
      degraded = false;
      logger?.info('quota service answering again');
    }
  }

  /** An Allow with a request_id (generated when not given), answered with the raw response when the service decided. */
  async function decideWithId(
    params: AllowParams,
    callOptions: AllowOptions,
    answer: Fallback,
  ): Promise<{ request: ReturnType<typeof allowRequest>; decision: QuotaDecision; response: AllowResponse | undefined }> {
    if (closed) throw new Error('quota client is closed');
    const request = allowRequest({ ...params, requestId: params.requestId === undefined || params.requestId === '' ? randomUUID() : params.requestId });
    const callDeadlineMs = callOptions.deadlineMs ?? deadlineMs;
    checkDeadlineMs(callDeadlineMs);
    try {
      const response = await send(request, callDeadlineMs, callOptions.signal);
      answering();
      return { request, decision: toDecision(response), response };
    } catch (error) {
      return { request, decision: await failed(error, callOptions.signal, { ...params, requestId: request.requestId }, answer), response: undefined };
    }
  }

  async function reserve(params: ReserveParams, callOptions: AllowOptions = {}): Promise<Reservation> {
    const { estimate, ...rest } = params;
    const { request, decision } = await decideWithId({ ...rest, cost: estimate }, callOptions, fallback);
    return new ReservationHandle({ rpc: client, deadlineMs, unavailable }, request, decision);
  }

  async function acquire(params: AcquireParams, callOptions: AcquireOptions = {}): Promise<Lease> {
    const mode = callOptions.onUnavailable ?? leaseOnUnavailable;
    const answer = leaseFallbacks[mode];
    if (answer === undefined) throw new RangeError(`onUnavailable must be 'fail_open' or 'fail_closed', got ${String(mode)}`);
    const sentAt = leaseTimers.now();
    const { request, decision, response } = await decideWithId(params, callOptions, answer);
    return new LeaseHandle({ rpc: client, deadlineMs, timers: leaseTimers, logger }, request, decision, sentAt, response?.leaseExpiresInMs ?? 0);
  }

  async function listPolicies(callOptions: { deadlineMs?: number } = {}): Promise<string[]> {
    const { policies } = await client.listPolicies({}, { signal: AbortSignal.timeout(callOptions.deadlineMs ?? deadlineMs) });
    return policies.map((policy) => policy.name);
  }

  return {
    allow,
    reserve,
    acquire,
    listPolicies,
    async close() {
      closed = true;
      // Unused slice units go back while the channel is still open.
      await slices?.close().catch(() => {});
      batcher?.close();
      channel.close();
    },
  };
}

/** How long to wait when the service sheds load without saying (its message names the time: "retry in 100 ms"). */
const OVERLOAD_RETRY_AFTER_MS = 100;

/** The service shed the request (RESOURCE_EXHAUSTED): a denial with its retry hint, from no limit in particular. */
function overloaded(details: string): QuotaDecision {
  const hint = /retry in (\d+) ms/.exec(details);
  const retryAfterMs = hint === null ? OVERLOAD_RETRY_AFTER_MS : Number(hint[1]);
  return { allowed: false, retryAfterMs, deniedBy: '', limits: [], delayMs: 0, source: 'fail_closed' };
}

function describe(error: unknown): string {
  if (error instanceof DeadlineExceeded) return 'deadline exceeded';
  if (error instanceof ClientError) return `${Status[error.code]}: ${error.details}`;
  return error instanceof Error ? error.message : String(error);
}

/** The service's DecisionSource; an older service that sends none decided in its store. */
const SOURCES: Partial<Record<ProtoDecisionSource, DecisionSource>> = {
  [ProtoDecisionSource.DECISION_SOURCE_STORE]: 'store',
  [ProtoDecisionSource.DECISION_SOURCE_FAIL_OPEN]: 'fail_open',
  [ProtoDecisionSource.DECISION_SOURCE_FAIL_CLOSED]: 'fail_closed',
  [ProtoDecisionSource.DECISION_SOURCE_LOCAL]: 'local',
  [ProtoDecisionSource.DECISION_SOURCE_SLICE]: 'slice',
};

/** An `AllowResponse` as the `QuotaDecision` that `allow()` resolves with: for code that calls `Allow` itself (quotactl does). */
export function toDecision(response: AllowResponse): QuotaDecision {
  return {
    allowed: response.allowed,
    retryAfterMs: response.retryAfterMs,
    deniedBy: response.deniedBy,
    // Decoded for this call alone, with exactly QuotaLimitStatus's fields: no copy needed.
    limits: response.limits,
    delayMs: response.delayMs,
    source: SOURCES[response.source] ?? 'store',
  };
}
