import { cappedName, identityDigests, type LimitStatus, valueDigest } from '@quota-service/core';
import type { Logger } from '../../logger.js';
import type { OverrideRecord } from '../../overrides/override.js';

/** Who made an admin call: the caller's name from the callers file, or "loopback" without caller authentication; and from where. */
export interface AdminCaller {
  readonly name: string;
  readonly peer: string;
  /** The policies it may act on (its `policies` in the callers file); absent: all (`['*']`, or no caller authentication). */
  readonly policies?: ReadonlySet<string>;
}

// The audit writes identity values as every log line does: digests (@quota-service/core's valueDigest).
export { cappedName, identityDigests, valueDigest };

/** A limit's status on an audit line (a reset's before and after). */
export const auditStatus = (status: LimitStatus) => ({ limit: status.name, remaining: status.remaining, of: status.limit });

/** An override on an audit line: what it sets and who set it, never its value (the line's target has the value's digest). */
export const auditRecord = (record: OverrideRecord) => ({
  parameters: record.parameters,
  expiresAtMs: record.expiresAtMs,
  setBy: record.setBy,
  setAtMs: record.setAtMs,
});

/** What one admin call did, filled in while it runs and written as one audit line when it ends. */
export interface AuditEntry {
  /** The admin caller, once the call was let in. */
  caller?: string;
  /** A change's state before and after it (null: none). */
  before?: unknown;
  after?: unknown;
  /** A set override's reason. */
  reason?: string;
}

/** One audit line: who, what and how it ended. */
export interface AuditLine {
  /** The action: reset, override.set, override.get, override.list, override.delete, policies.validate. */
  action: string;
  method: string;
  /** The caller's name, or null when none could be named (no or unknown token; a refused client without caller authentication). */
  caller: string | null;
  peer: string;
  target: Record<string, unknown>;
  entry: AuditEntry;
  /** Refused: the gRPC status name and its message. */
  refused?: { code: string; why: string };
}

/**
 * The audit trail of the admin API: one line per call, on the `audit`
 * component's logger: `info` when it was done, `warn` when it was refused
 * (with the status and why). Tokens never reach it: the callers registry
 * keeps only their hashes, a caller is named by its name, and identity
 * values appear as digests only.
 */
export class AuditLog {
  constructor(private readonly logger: Logger) {}

  write(line: AuditLine): void {
    const { action, method, caller, peer, target, entry, refused } = line;
    const fields = {
      audit: action,
      method,
      caller,
      peer,
      outcome: refused === undefined ? 'ok' : 'refused',
      target,
      ...(refused === undefined ? {} : refused),
      ...(entry.before === undefined ? {} : { before: entry.before }),
      ...(entry.after === undefined ? {} : { after: entry.after }),
      ...(entry.reason === undefined ? {} : { reason: entry.reason }),
    };
    if (refused === undefined) this.logger.info(fields, `admin ${action}`);
    else this.logger.warn(fields, `admin ${action} refused`);
  }
}
