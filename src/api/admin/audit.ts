import { createHash } from 'node:crypto';
import type { LimitStatus } from '@quota-service/core';
import type { Logger } from '../../logger.js';
import type { OverrideRecord } from '../../overrides/override.js';

/** Who made an admin call: the caller's name from the callers file, or "loopback" without caller authentication; and from where. */
export interface AdminCaller {
  readonly name: string;
  readonly peer: string;
  /** The policies it may act on (its `policies` in the callers file); absent: all (`['*']`, or no caller authentication). */
  readonly policies?: ReadonlySet<string>;
}

/** At most this many identity parts, and this many characters of a name, go on an audit line: a refused request may be anything. */
const MAX_PARTS = 16;
const MAX_CHARS = 64;

/**
 * An identity value in the audit log: the first 16 hex digits of its SHA-256
 * (`printf %s acme | sha256sum`). Identity values may be API keys or personal
 * data, and no log line carries one; the digest still lets an auditor find
 * every action on a value they know.
 */
export const valueDigest = (value: string): string => createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 16);

/** A name as the request gave it (a policy, a limit, an identity part), at most MAX_CHARS characters of it. */
export const cappedName = (name: string): string => (name.length <= MAX_CHARS ? name : `${name.slice(0, MAX_CHARS)}…`);

/** Identity parts by name, each value as its digest; at most MAX_PARTS of them. */
export function identityDigests(identity: Readonly<Record<string, string>>): Record<string, string> {
  const names: string[] = [];
  for (const name in identity) {
    if (names.length === MAX_PARTS) break;
    if (Object.hasOwn(identity, name)) names.push(name);
  }
  const out: Record<string, string> = {};
  for (const name of names.sort()) out[cappedName(name)] = valueDigest(identity[name]!);
  return out;
}

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
