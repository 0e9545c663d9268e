import { createHash } from 'node:crypto';
import type { Logger } from '../logger.js';

/** Who made an admin call: the caller's name from the callers file, or "loopback" without caller authentication; and from where. */
export interface AdminCaller {
  readonly name: string;
  readonly peer: string;
}

/**
 * An identity value in the audit log: the first 16 hex digits of its SHA-256
 * (`printf %s acme | sha256sum`). Identity values may be API keys or personal
 * data, and no log line carries one; the digest still lets an auditor find
 * every action on a value they know.
 */
export const valueDigest = (value: string): string => createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 16);

/** Every identity part as its digest. */
export function identityDigests(identity: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(identity).sort()) out[name] = valueDigest(identity[name]!);
  return out;
}

/**
 * The audit trail of the admin API: one info line per action done (who, what,
 * before and after) and one warning per call refused, on the `audit`
 * component's logger. Tokens never reach it: the callers registry keeps only
 * their hashes, and a caller is named by its name.
 */
export class AuditLog {
  constructor(private readonly logger: Logger) {}

  /** An action that was done. */
  done(caller: AdminCaller, action: string, fields: { target?: unknown; before?: unknown; after?: unknown; reason?: string }): void {
    this.logger.info({ audit: action, caller: caller.name, peer: caller.peer, ...fields }, `admin ${action}`);
  }

  /** An admin call refused before it did anything (no admin role, not from loopback). */
  refused(caller: string, peer: string, method: string, why: string): void {
    this.logger.warn({ audit: 'refused', caller, peer, method, why }, 'admin call refused');
  }
}
