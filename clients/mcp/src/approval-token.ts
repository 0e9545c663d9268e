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

/** Why a presented token does not approve the call. */
export type ApprovalTokenProblem = 'malformed' | 'bad_signature' | 'expired' | 'other_call' | 'used';

interface Grant {
  tool: string;
  /** SHA-256 of the arguments in canonical JSON (argumentsDigest). */
  args: string;
  requester: ApprovalParty;
  approver: ApprovalParty;
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

/**
 * Signed approvals: an approver (another principal) issues a token for one call
 * (tool, arguments digest, requester, expiry), HMAC-SHA256 signed with a server
 * secret; the requester presents it under `_meta[APPROVAL_META_KEY]`. The calling
 * client cannot make one itself: it needs the secret or an approver's credential.
 * A token is spent by the first call that presents it; the record of spent tokens
 * lives in this object, so replicas sharing the secret each accept a token once.
 */
export class ApprovalTokens {
  private readonly secret: Buffer;
  private readonly ttlMs: number;
  private readonly clock: Clock;
  /** Nonces of spent tokens, until they expire. */
  private readonly spent = new Map<string, number>();

  constructor(options: { secret: string | Buffer; ttlMs?: number; clock?: Clock }) {
    this.secret = Buffer.from(options.secret);
    if (this.secret.length < 32) throw new RangeError('the approval secret must be at least 32 bytes');
    this.ttlMs = options.ttlMs ?? 5 * 60_000;
    this.clock = options.clock ?? systemClock;
  }

  /** A token approving `request`, signed for `approver`. Approving one's own call is refused. */
  issue(request: ApprovalRequestDetails, approver: Principal): { token: string; expiresAt: Date } {
    if (samePerson(request.requester, approver)) throw new Error('an approver cannot approve its own calls');
    const grant: Grant = {
      tool: request.tool,
      args: argumentsDigest(request.arguments),
      requester: party(request.requester),
      approver: party(approver),
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
    for (const [nonce, exp] of this.spent) if (now >= exp) this.spent.delete(nonce);
    if (this.spent.has(grant.nonce)) return { problem: 'used' };
    this.spent.set(grant.nonce, grant.exp);
    return { approver: grant.approver };
  }

  private sign(payload: string): string {
    return createHmac('sha256', this.secret).update(payload).digest('base64url');
  }
}
