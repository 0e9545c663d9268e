import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { systemClock, type Clock } from '@quota-service/core';
import type { Principal } from './principal.js';

/** The `_meta` key of a tools/call request that carries a signed approval token. */
export const APPROVAL_META_KEY = 'dev.quota-service/approval';

/** A person, as an approval names them: subject and tenant. */
export interface ApprovalParty {
  subject: string;
  tenant?: string;
}

/** The call an approver is asked to approve: exactly this tool, these arguments, this requester. */
export interface ApprovalRequestDetails {
  tool: string;
  arguments: unknown;
  requester: ApprovalParty;
}

/**
 * Why a presented token does not approve the call. `other_tenant`: its approver
 * belongs to another tenant than the requester and held no role this object
 * accepts across tenants.
 */
export type ApprovalTokenProblem = 'malformed' | 'bad_signature' | 'expired' | 'other_call' | 'other_tenant' | 'used';

/** Why an approver may not approve a call: it is its own, or another tenant's. */
export type ApprovalRefusal = 'own_call' | 'other_tenant';

interface Grant {
  tool: string;
  /** SHA-256 of the arguments in canonical JSON (argumentsDigest). */
  args: string;
  requester: ApprovalParty;
  approver: ApprovalParty;
  /** The role the approver approved under when its tenant is not the requester's; absent otherwise. */
  crossTenantRole?: string;
  /** Milliseconds since the epoch. */
  exp: number;
  nonce: string;
}

/** SHA-256 (hex) of the arguments as canonical JSON: object keys sorted at every level. */
export function argumentsDigest(args: unknown): string {
  const canonical = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(canonical)
      : value !== null && typeof value === 'object'
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
          )
        : value;
  return createHash('sha256')
    .update(JSON.stringify(canonical(args ?? null)))
    .digest('hex');
}

const party = (p: ApprovalParty): ApprovalParty => (p.tenant === undefined ? { subject: p.subject } : { subject: p.subject, tenant: p.tenant });
const samePerson = (a: ApprovalParty, b: ApprovalParty) => a.subject === b.subject && a.tenant === b.tenant;
/** No tenant is a tenant of its own: it matches only another party without one. */
const sameTenant = (a: ApprovalParty, b: ApprovalParty) => a.tenant === b.tenant;

/**
 * Signed approvals: an approver (another principal) issues a token for one call
 * (tool, arguments digest, requester, expiry), HMAC-SHA256 signed with a server
 * secret; the requester presents it under `_meta[APPROVAL_META_KEY]`. The calling
 * client cannot make one itself: it needs the secret or an approver's credential.
 * A token is spent by the first call that presents it; the record of spent tokens
 * lives in this object, so replicas sharing the secret each accept a token once.
 *
 * An approver approves calls of its own tenant only: the signed grant names both
 * tenants, and a token whose approver's tenant differs from the requester's is
 * refused when issued and again when redeemed, unless the approver held one of
 * `crossTenantRoles` (none by default), which the grant then names.
 */
export class ApprovalTokens {
  private readonly secret: Buffer;
  private readonly ttlMs: number;
  private readonly clock: Clock;
  private readonly crossTenantRoles: ReadonlySet<string>;
  /** Nonces of spent tokens, until they expire. */
  private readonly spent = new Map<string, number>();

  /**
   * `crossTenantRoles`: roles whose holders may approve calls of any tenant (a
   * platform's own operators, say). Default none: approvers approve their own
   * tenant's calls only. Give every server sharing the secret the same list.
   */
  constructor(options: { secret: string | Buffer; ttlMs?: number; clock?: Clock; crossTenantRoles?: readonly string[] }) {
    this.secret = Buffer.from(options.secret);
    if (this.secret.length < 32) throw new RangeError('the approval secret must be at least 32 bytes');
    this.ttlMs = options.ttlMs ?? 5 * 60_000;
    this.clock = options.clock ?? systemClock;
    this.crossTenantRoles = new Set(options.crossTenantRoles ?? []);
  }

  /** Why `approver` may not approve `request`, or undefined when it may. */
  refusalFor(request: ApprovalRequestDetails, approver: Principal): ApprovalRefusal | undefined {
    if (samePerson(request.requester, approver)) return 'own_call';
    if (!sameTenant(request.requester, approver) && this.crossTenantRoleOf(approver) === undefined) return 'other_tenant';
    return undefined;
  }

  /** A token approving `request`, signed for `approver`. Refused (thrown) when refusalFor names a reason. */
  issue(request: ApprovalRequestDetails, approver: Principal): { token: string; expiresAt: Date } {
    const refusal = this.refusalFor(request, approver);
    if (refusal === 'own_call') throw new Error('an approver cannot approve its own calls');
    if (refusal === 'other_tenant') throw new Error('an approver can approve calls of its own tenant only, unless it holds a cross-tenant role');
    const crossTenantRole = sameTenant(request.requester, approver) ? undefined : this.crossTenantRoleOf(approver);
    const grant: Grant = {
      tool: request.tool,
      args: argumentsDigest(request.arguments),
      requester: party(request.requester),
      approver: party(approver),
      ...(crossTenantRole === undefined ? {} : { crossTenantRole }),
      exp: this.clock.now() + this.ttlMs,
      nonce: randomBytes(16).toString('base64url'),
    };
    const payload = Buffer.from(JSON.stringify(grant)).toString('base64url');
    return { token: `${payload}.${this.sign(payload)}`, expiresAt: new Date(grant.exp) };
  }

  /** Checks `token` against the call and spends it: the approver on success, else why not. */
  redeem(token: string, call: ApprovalRequestDetails): { approver: ApprovalParty } | { problem: ApprovalTokenProblem } {
    const [payload, signature, extra] = token.split('.');
    if (payload === undefined || signature === undefined || extra !== undefined) return { problem: 'malformed' };
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { problem: 'bad_signature' };
    const grant = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Grant;
    const now = this.clock.now();
    if (now >= grant.exp) return { problem: 'expired' };
    if (grant.tool !== call.tool || grant.args !== argumentsDigest(call.arguments) || !samePerson(grant.requester, party(call.requester))) {
      return { problem: 'other_call' };
    }
    // Checked here too, not only when issued: a token signed by a server with another
    // list of cross-tenant roles (or none of this check) must not cross tenants here.
    if (!sameTenant(grant.requester, grant.approver) && (grant.crossTenantRole === undefined || !this.crossTenantRoles.has(grant.crossTenantRole))) {
      return { problem: 'other_tenant' };
    }
    for (const [nonce, exp] of this.spent) if (now >= exp) this.spent.delete(nonce);
    if (this.spent.has(grant.nonce)) return { problem: 'used' };
    this.spent.set(grant.nonce, grant.exp);
    return { approver: grant.approver };
  }

  private crossTenantRoleOf(approver: Principal): string | undefined {
    return approver.roles.find((role) => this.crossTenantRoles.has(role));
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.secret).update(payload).digest('base64url');
  }
}
