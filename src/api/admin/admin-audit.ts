import { type CallContext, ServerError, type ServerMiddlewareCall, Status } from 'nice-grpc';
import type { OverrideKey } from '@quota-service/contract';
import { type AuditEntry, type AuditLog, cappedName, identityDigests, valueDigest } from './audit.js';
import type { CallLogContext } from '../../grpc/logging-middleware.js';

/** The admin service's methods. */
const ADMIN_PREFIX = '/quota.v1.QuotaAdminService/';

/** What the audit middleware hands the admin handlers: the call's audit entry, to fill in. */
export interface AdminAuditContext {
  adminAudit?: AuditEntry;
}

/** Each method's action name on an audit line. */
const ACTIONS: Record<string, string> = {
  ResetQuota: 'reset',
  SetOverride: 'override.set',
  GetOverride: 'override.get',
  ListOverrides: 'override.list',
  DeleteOverride: 'override.delete',
  ValidatePolicies: 'policies.validate',
};

/**
 * One audit line per admin call, however it ends: done, refused by the auth
 * middleware (UNAUTHENTICATED, PERMISSION_DENIED), by the admin check, for
 * bad input or NOT_FOUND, or failed. Runs outside the error middleware, so
 * it sees the status the caller gets, and outside the auth middleware, which
 * names the caller on the call's log fields (`callLog.caller`) once it knows
 * the token. The line never carries a token or an identity value (see
 * AuditLog).
 */
export function adminAuditMiddleware(audit: AuditLog) {
  return async function* auditAdmin<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
    if (!call.method.path.startsWith(ADMIN_PREFIX)) return yield* call.next(call.request, context);
    const method = call.method.path.slice(ADMIN_PREFIX.length);
    const callLog = (context as CallContext & CallLogContext).callLog ?? {};
    const entry: AuditEntry = {};
    const write = (refused?: { code: string; why: string }) => {
      const named = entry.caller ?? callLog.caller;
      audit.write({
        action: ACTIONS[method] ?? method,
        method,
        caller: typeof named === 'string' ? named : null,
        peer: context.peer,
        target: targetOf(method, call.request),
        entry,
        ...(refused === undefined ? {} : { refused }),
      });
    };
    try {
      const response = yield* call.next(call.request, { ...context, callLog, adminAudit: entry } as CallContext);
      write();
      return response;
    } catch (error) {
      write(refusal(error));
      throw error;
    }
  };
}

/** The status a failed call answers: the error middleware's, or a cancellation. */
function refusal(error: unknown): { code: string; why: string } {
  if (error instanceof ServerError) return { code: Status[error.code], why: error.details };
  if (error instanceof Error && error.name === 'AbortError') return { code: 'CANCELLED', why: 'the call was cancelled' };
  return { code: 'INTERNAL', why: 'internal error' };
}

/** What a call names, as its request gives it (valid or not): names capped, identity values as digests. */
function targetOf(method: string, request: unknown): Record<string, unknown> {
  const r = request as Record<string, unknown>;
  switch (method) {
    case 'ResetQuota':
      return {
        policy: cappedName(String(r.policy ?? '')),
        identity: identityDigests((r.identity ?? {}) as Record<string, string>),
        limits: ((r.limits ?? []) as string[]).slice(0, 16).map(cappedName),
      };
    case 'SetOverride':
    case 'GetOverride':
    case 'DeleteOverride':
      return keyTarget(r.key as OverrideKey | undefined);
    case 'ListOverrides':
      return { limit: cappedName(String(r.limit ?? '')) };
    case 'ValidatePolicies':
      return { source: cappedName(String(r.source ?? '')), chars: String(r.text ?? '').length };
    default:
      return {};
  }
}

const MATCHES = ['unspecified', 'exact', 'prefix'];

function keyTarget(key: OverrideKey | undefined): Record<string, unknown> {
  if (key === undefined) return {};
  return { limit: cappedName(key.limit), match: MATCHES[key.match] ?? String(key.match), valueSha256: valueDigest(key.value) };
}
