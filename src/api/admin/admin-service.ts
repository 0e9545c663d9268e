import { type CallContext, ServerError, Status, type ServiceImplementation } from 'nice-grpc';
import { toParams } from '@quota-service/core';
import {
  DeleteOverrideRequest,
  GetOverrideRequest,
  ListOverridesRequest,
  type Override,
  type OverrideKey,
  OverrideMatch,
  QuotaAdminServiceDefinition,
  ResetQuotaRequest,
  SetOverrideRequest,
  ValidatePoliciesRequest,
} from '@quota-service/contract';
import { type AdminCaller, auditRecord, auditStatus } from './audit.js';
import { OverrideNotFoundError, type QuotaAdmin, type TargetInput } from './quota-admin.js';
import type { OverrideRecord } from '../../overrides/override.js';
import type { AdminContext as AccessContext } from './admin-access.js';
import type { AdminAuditContext } from './admin-audit.js';
import { checkedInt64Decode } from '../../grpc/checked-int64.js';
import { fromProtoParameters, toProtoParameters } from '../limit-parameters.js';
import { strictUtf8Decode } from '../../grpc/strict-utf8.js';

const { resetQuota, setOverride, getOverride, listOverrides, deleteOverride, validatePolicies } = QuotaAdminServiceDefinition.methods;

/**
 * QuotaAdminServiceDefinition as served: requests decoded as strict UTF-8, like the quota API's (src/grpc/strict-utf8.ts),
 * and 64-bit integers out of range kept for a refusal (src/grpc/checked-int64.ts).
 */
export const adminServiceDefinition = {
  ...QuotaAdminServiceDefinition,
  methods: {
    resetQuota: { ...resetQuota, requestType: { ...resetQuota.requestType, decode: strictUtf8Decode(ResetQuotaRequest) } },
    // Its 64-bit integers (ttl_ms, limits) may be out of a number's range: refused by int64RangeMiddleware.
    setOverride: { ...setOverride, requestType: { ...setOverride.requestType, decode: checkedInt64Decode(SetOverrideRequest, 'quota.v1.SetOverrideRequest') } },
    getOverride: { ...getOverride, requestType: { ...getOverride.requestType, decode: strictUtf8Decode(GetOverrideRequest) } },
    listOverrides: { ...listOverrides, requestType: { ...listOverrides.requestType, decode: strictUtf8Decode(ListOverridesRequest) } },
    deleteOverride: { ...deleteOverride, requestType: { ...deleteOverride.requestType, decode: strictUtf8Decode(DeleteOverrideRequest) } },
    validatePolicies: { ...validatePolicies, requestType: { ...validatePolicies.requestType, decode: strictUtf8Decode(ValidatePoliciesRequest) } },
  },
} as const;

/** What an admin handler gets: the caller the access middleware admitted (src/api/admin/admin-access.ts) and the call's audit entry. */
export type AdminContext = AccessContext & AdminAuditContext;

/**
 * quota.v1.QuotaAdminService: maps proto messages to QuotaAdmin and back, and
 * puts what a change did (before, after) on the call's audit entry.
 */
export function adminService(admin: QuotaAdmin): ServiceImplementation<typeof adminServiceDefinition, AdminContext> {
  return {
    async resetQuota(request, context) {
      const result = await admin.reset({ policy: request.policy, identity: request.identity, limits: request.limits });
      record(context, { before: result.before.map(auditStatus), after: result.after.map(auditStatus) });
      return result;
    },

    async setOverride(request, context) {
      const { current, previous } = await admin.setOverride(
        { target: targetOf(request.key), parameters: fromProtoParameters(request.parameters), ttlMs: request.ttlMs, reason: request.reason },
        callerOf(context),
      );
      record(context, { before: previous === undefined ? null : auditRecord(previous), after: auditRecord(current), reason: current.reason });
      return { current: toProtoOverride(current), ...(previous === undefined ? {} : { previous: toProtoOverride(previous) }) };
    },

    async getOverride(request, context) {
      return { current: toProtoOverride(await notFound(admin.getOverride(targetOf(request.key), callerOf(context)))) };
    },

    async listOverrides(request, context) {
      return { overrides: (await admin.listOverrides(request.limit, callerOf(context))).map(toProtoOverride) };
    },

    async deleteOverride(request, context) {
      const previous = await notFound(admin.deleteOverride(targetOf(request.key), callerOf(context)));
      record(context, { before: auditRecord(previous), after: null });
      return { previous: toProtoOverride(previous) };
    },

    async validatePolicies(request) {
      return admin.validatePolicies(request.text, request.source);
    },
  };
}

function callerOf(context: CallContext & AdminContext): AdminCaller {
  // The access middleware always sets it; a missing one would be a wiring bug, not a caller.
  if (context.admin === undefined) throw new Error('admin call without an admin caller');
  return context.admin;
}

/** A change's before and after (and a set's reason) on the call's audit line. */
function record(context: AdminContext, change: { before: unknown; after: unknown; reason?: string }): void {
  if (context.adminAudit !== undefined) Object.assign(context.adminAudit, change);
}

const MATCH: Partial<Record<OverrideMatch, 'exact' | 'prefix'>> = {
  [OverrideMatch.OVERRIDE_MATCH_EXACT]: 'exact',
  [OverrideMatch.OVERRIDE_MATCH_PREFIX]: 'prefix',
};

function targetOf(key: OverrideKey | undefined): TargetInput {
  return { limit: key?.limit ?? '', match: key === undefined ? undefined : MATCH[key.match], value: key?.value ?? '' };
}

function notFound<T>(result: Promise<T>): Promise<T> {
  return result.catch((error: unknown) => {
    throw error instanceof OverrideNotFoundError ? new ServerError(Status.NOT_FOUND, error.message) : error;
  });
}

function toProtoOverride(record: OverrideRecord & { valueSha256?: string }): Override {
  return {
    key: {
      limit: record.limit,
      match: record.match === 'exact' ? OverrideMatch.OVERRIDE_MATCH_EXACT : OverrideMatch.OVERRIDE_MATCH_PREFIX,
      value: record.value,
    },
    keyBy: record.keyBy,
    parameters: toProtoParameters(record.algorithm, toParams(record.algorithm, record.parameters as Record<string, unknown>)),
    expiresAtMs: record.expiresAtMs,
    reason: record.reason,
    setBy: record.setBy,
    setAtMs: record.setAtMs,
    valueSha256: record.valueSha256 ?? '',
  };
}
