import { ServerError, Status, type CallContext, type ServerMiddlewareCall } from 'nice-grpc';
import { quoteCapped } from '@quota-service/core';
import type { Caller, CallerRegistry } from '../config/callers.js';
import type { Logger } from '../logger.js';
import type { CallLogContext } from './logging-middleware.js';

/** What the auth middleware hands the quota API's handlers: the authenticated caller (absent without caller authentication). */
export interface CallerContext {
  caller?: Caller;
  /**
   * The caller the call's token names now: undefined once a reload of the
   * callers file revoked it. A stream (AllowStream) asks before each batch, so
   * a rotated token takes effect on streams already open.
   */
  currentCaller?: () => Caller | undefined;
}

/** Only the quota API and Envoy's rate limit service need a caller; health and reflection stay open for probes and grpcurl. */
const PROTECTED_PREFIXES = ['/quota.v1.', '/envoy.service.ratelimit.v3.'];

/**
 * Bearer tokens per calling service: `authorization: Bearer <token>` must name
 * a known caller (else UNAUTHENTICATED), and every policy the request names
 * must be one that caller may use (else PERMISSION_DENIED). The token is never
 * logged or echoed; log lines carry the caller's name.
 */
export function authMiddleware(callers: CallerRegistry, logger: Logger) {
  return async function* authenticate<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
    if (!isProtected(call.method.path)) return yield* call.next(call.request, context);
    const header = context.metadata.get('authorization');
    const callLog = (context as CallContext & CallLogContext).callLog;
    const known = authenticateCall(callers, logger, call.method.path, header, call.requestStream ? undefined : call.request, callLog);
    return yield* call.next(call.request, { ...context, ...known } as CallContext);
  };
}

/**
 * The check behind the auth middleware, for one call of a protected method:
 * its `authorization` header must name a known caller, and every policy its
 * request names (none for a stream: pass undefined) must be one that caller
 * may use. Throws the ServerError to answer; answers what the handlers get.
 * The caller's name (never its token) goes on the call's log fields as soon
 * as it is known, so a refusal for a policy is logged and audited by name.
 */
export function authenticateCall(
  callers: CallerRegistry,
  logger: Logger,
  path: string,
  header: unknown,
  request: unknown,
  logFields: Record<string, unknown> | undefined,
): { caller: Caller; currentCaller: () => Caller | undefined } {
  const match = typeof header === 'string' ? /^Bearer (\S+)$/i.exec(header.trim()) : null;
  if (match === null) throw new ServerError(Status.UNAUTHENTICATED, 'missing bearer token: send metadata "authorization: Bearer <token>"');
  const token = match[1]!;
  const caller = callers.byToken(token);
  if (caller === undefined) {
    logger.debug({ method: path }, 'unknown bearer token');
    throw new ServerError(Status.UNAUTHENTICATED, 'unknown bearer token');
  }
  if (logFields) logFields.caller = caller.name;
  if (request !== undefined && caller.policies !== undefined) {
    for (const policy of policiesNamedIn(request)) {
      // A name that is not valid UTF-8 names no policy: validation refuses it as INVALID_ARGUMENT.
      if (!caller.policies.has(policy) && policy.isWellFormed()) {
        logger.debug({ method: path, caller: caller.name, policy }, 'policy not allowed for caller');
        throw new ServerError(Status.PERMISSION_DENIED, `caller "${caller.name}" may not use policy ${quoteCapped(policy)}`);
      }
    }
  }
  return { caller, currentCaller: () => callers.byToken(token) };
}

/** Whether a method needs a caller: the quota API and Envoy's rate limit service do, health and reflection do not. */
export function isProtected(path: string): boolean {
  return PROTECTED_PREFIXES.some((prefix) => path.startsWith(prefix));
}

/**
 * Every policy a request names: its own `policy` field and the `policy` of
 * each element of its repeated message fields (an AllowBatch's items), so
 * rpcs added later are covered without a list to keep in sync. Map fields
 * (identity) are not searched: an identity part may well be called "policy".
 */
export function policiesNamedIn(request: unknown): string[] {
  const names: string[] = [];
  collectPolicies(request, 0, names);
  return names;
}

/** Walks one message into `names`: one list for a whole AllowBatch, not one per item (it runs on every call). */
function collectPolicies(message: unknown, depth: number, names: string[]): void {
  if (typeof message !== 'object' || message === null || depth > 3) return;
  const fields = message as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    const field = fields[key];
    if (key === 'policy' && typeof field === 'string') names.push(field);
    else if (Array.isArray(field)) for (const item of field) collectPolicies(item, depth + 1, names);
  }
}
