/**
 * The part of a verified credential the guard reads: `AuthInfo` of either SDK line
 * (set by bearer auth on HTTP) has this shape.
 */
export interface VerifiedCredential {
  readonly clientId: string;
  readonly scopes: readonly string[];
  readonly extra?: Record<string, unknown>;
}

/**
 * Who is calling, as established by authentication: the bearer-token verifier on
 * HTTP, the operator's configuration on stdio. Never built from tool arguments or
 * any other value the client chose, so a model cannot spend someone else's quota.
 */
export interface Principal {
  /** Stable internal id of the user or service account; the quota identity `user`. */
  readonly subject: string;
  /** Tenant, when the deployment is multi-tenant; the quota identity `tenant`. */
  readonly tenant?: string;
  /** OAuth client the credential was issued to, for the audit trail. */
  readonly clientId?: string;
  readonly scopes: readonly string[];
  readonly roles: readonly string[];
}

/**
 * Reads the principal a token verifier put into AuthInfo. Verifiers put the
 * subject, tenant and roles under `extra` (AuthInfo has no fields for them);
 * `extra.subject` falls back to the client id for client-credential tokens.
 */
export function principalFromAuthInfo(auth: VerifiedCredential): Principal {
  const extra = auth.extra ?? {};
  const subject = typeof extra['subject'] === 'string' ? extra['subject'] : auth.clientId;
  const tenant = typeof extra['tenant'] === 'string' ? extra['tenant'] : undefined;
  const roles = Array.isArray(extra['roles']) ? extra['roles'].filter((r): r is string => typeof r === 'string') : [];
  return { subject, clientId: auth.clientId, scopes: [...auth.scopes], roles, ...(tenant === undefined ? {} : { tenant }) };
}

/** The quota identity of a principal: `user`, plus `tenant` when known. */
export function quotaIdentity(principal: Principal): Record<string, string> {
  return principal.tenant === undefined ? { user: principal.subject } : { user: principal.subject, tenant: principal.tenant };
}
