import { ServerError, Status, type CallContext } from 'nice-grpc';
import type { Policy } from '@quota-service/core';
import type { QuotaEngine } from '../../engine/engine.js';
import type { Logger } from '../../logger.js';
import type {
  AllowBatchRequest,
  AllowBatchResult,
  AllowBatchResponse,
  AllowRequest,
  AllowResponse,
  GetQuotaRequest,
  GetQuotaResponse,
  ListPoliciesResponse,
} from '@quota-service/contract';
import { DEFAULT_ADMISSION } from '../../config/admission-limits.js';
import { Admission } from '../../grpc/admission.js';
import { allowStreamHandler } from './allow-stream.js';
import { leaseHandlers } from './lease-handlers.js';
import { toProtoLimit } from '../limit-parameters.js';
import type { CallerContext } from '../../grpc/auth-middleware.js';
import { checkBatchSize, decideEach, lateMessage, shedEach, toAllowResponse } from './decide-each.js';
import { StaleRequests } from './stale-requests.js';
import { DEFAULT_CLOCK_SKEW_ALLOWANCE_MS } from '../../config/stale-requests.js';
import { settleHandler } from './settle-handler.js';
import { takeSliceHandler } from './take-slice-handler.js';
import type { QuotaServiceHandlers } from './service-definition.js';

export { MAX_BATCH_SIZE } from './decide-each.js';

export const ALLOW_PATH = '/quota.v1.QuotaService/Allow';
const ALLOW_BATCH_PATH = '/quota.v1.QuotaService/AllowBatch';
export const ALLOW_STREAM_PATH = '/quota.v1.QuotaService/AllowStream';

/**
 * quota.v1.QuotaService: maps proto messages to the engine and back, nothing
 * more. `draining` aborts when the server starts shutting down: open
 * AllowStream streams then answer what they have read and end. `admission`
 * sheds what exceeds the bounds on pending decisions (src/grpc/admission.ts).
 * `stale` refuses requests that arrive after their caller gave up
 * (src/api/quota/stale-requests.ts), before they take a place or reach the engine.
 */
export function quotaService(
  engine: QuotaEngine,
  logger: Logger,
  draining: AbortSignal,
  admission = new Admission(DEFAULT_ADMISSION),
  stale = new StaleRequests({ allowanceMs: DEFAULT_CLOCK_SKEW_ALLOWANCE_MS }),
): QuotaServiceHandlers {
  return {
    ...leaseHandlers(engine, admission),
    takeSlice: takeSliceHandler(engine, admission),

    // An AllowRequest has the engine's AllowInput fields (and the door's deadline_ms, sent_at_unix_ms): passed as it is, not copied.
    allow(request: AllowRequest, context: CallContext & CallerContext): Promise<AllowResponse> {
      const late = stale.check(request, context.peer, context.caller?.name, 'Allow');
      if (late > 0) return Promise.reject(new ServerError(Status.DEADLINE_EXCEEDED, lateMessage(late, request.deadlineMs)));
      const release = admission.admit(context, 1);
      return engine.allow(request, toAllowResponse).then(...released<AllowResponse>(release));
    },

    async allowBatch(request: AllowBatchRequest, context: CallContext & CallerContext): Promise<AllowBatchResponse> {
      checkBatchSize(request.requests);
      const late = stale.checkEach(request.requests, context.peer, context.caller?.name, 'AllowBatch');
      const release = admission.admit(context, toDecide(request.requests.length, late));
      try {
        return { results: await decideEach(engine, request.requests, ALLOW_BATCH_PATH, logger, undefined, late) };
      } finally {
        release();
      }
    },

    allowStream: allowStreamHandler((requests, caller, context) => {
      // Called as the batch is read: its requests' lateness is measured now.
      const late = stale.checkEach(requests, context.peer, caller?.name, 'AllowStream');
      const release = admission.tryAdmit(context, toDecide(requests.length, late));
      // Shed: every item says so (a late one that it came too late), and the stream goes on.
      if (typeof release === 'string') return Promise.resolve(shedEach(requests, late, release));
      return decideEach(engine, requests, ALLOW_STREAM_PATH, logger, caller, late).then(...released<AllowBatchResult[]>(release));
    }, draining),

    async getQuota(request: GetQuotaRequest, context: CallContext & CallerContext): Promise<GetQuotaResponse> {
      const release = admission.admit(context, 1);
      try {
        return { limits: await engine.getQuota({ policy: request.policy, identity: request.identity }) };
      } finally {
        release();
      }
    },

    settle: settleHandler(engine, admission),

    // An authenticated caller sees the policies it may use, nothing more (least privilege:
    // other callers' policy names and limits are not its business).
    async listPolicies(_request: unknown, context: CallContext & CallerContext): Promise<ListPoliciesResponse> {
      const allowed = context.caller?.policies;
      const policies = engine.listPolicies().filter((policy) => allowed === undefined || allowed.has(policy.name));
      return { policies: policies.map(toProtoPolicy) };
    },
  };
}

/** How many requests of a batch take a place in the admission bounds: all but those refused as late. */
function toDecide(count: number, late: readonly number[] | undefined): number {
  if (late === undefined) return count;
  for (const ms of late) if (ms > 0) count--;
  return count;
}

/** The handlers of a `then` that give the admitted places back, whatever the outcome: one promise, not finally's two. */
function released<T>(release: () => void): [(value: T) => T, (error: unknown) => never] {
  return [
    (value) => {
      release();
      return value;
    },
    (error) => {
      release();
      throw error;
    },
  ];
}

function toProtoPolicy(policy: Policy) {
  return {
    name: policy.name,
    description: policy.description,
    limits: policy.limits.map(toProtoLimit),
    failureMode: { mode: policy.failure.mode, localShare: policy.failure.mode === 'local' ? policy.failure.localShare : 0 },
  };
}
