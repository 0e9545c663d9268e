import { appendFile } from 'node:fs/promises';

/** Outcome of the permission step. */
export type PermissionOutcome = 'allowed' | 'denied';
/**
 * Outcome of the approval step; 'not_required' for tools that are not sensitive.
 * Signed approvals: 'required' (the call carried no token), 'invalid' (its token
 * did not approve this call).
 */
export type ApprovalOutcome = 'not_required' | 'approved' | 'declined' | 'cancelled' | 'unsupported' | 'failed' | 'required' | 'invalid';
/**
 * Outcome of the quota step. 'fail_open' / 'fail_closed': the service could not be
 * asked and the tool's failure mode decided; 'error': the service refused the
 * request itself (bad policy name or cost), so the call was refused.
 */
export type QuotaOutcome = 'not_checked' | 'allowed' | 'denied' | 'fail_open' | 'fail_closed' | 'error';
/**
 * Outcome of the in-flight cap (a tool with a `concurrency` policy): 'acquired' (a
 * lease held while the call ran), 'denied' (the cap was full), 'fail_open' /
 * 'fail_closed' (the service could not be asked), 'error' (the service refused the request).
 */
export type ConcurrencyOutcome = 'acquired' | 'denied' | 'fail_open' | 'fail_closed' | 'error';
/**
 * How the call ended. 'refused': a step stopped it, the tool body did not run;
 * 'ok' / 'tool_error': the body ran and returned a result (isError false / true);
 * 'exception': the body ran and threw (the SDK turns that into a tool error).
 */
export type ResultStatus = 'ok' | 'tool_error' | 'refused' | 'exception';

/** One record per tool call that reached the guard. Never holds a credential. */
export interface AuditRecord {
  time: string;
  tool: string;
  /** JSON-RPC id of the tools/call request, and the transport session if any. */
  requestId: string | number;
  sessionId?: string;
  principal: { subject: string; tenant?: string; clientId?: string } | null;
  /** Who approved the call, for a signed approval. */
  approver?: { subject: string; tenant?: string };
  /** The arguments after redaction (values replaced by default). */
  arguments: unknown;
  steps: {
    /** 'not_checked': refused before the arguments were validated (an HTTP scope challenge, SDK 2.x). */
    validation: 'passed' | 'not_checked';
    authentication: 'passed' | 'failed';
    permission: PermissionOutcome | 'not_checked';
    approval: ApprovalOutcome | 'not_checked';
    quota: {
      outcome: QuotaOutcome;
      policy?: string;
      cost?: number;
      deniedBy?: string;
      retryAfterMs?: number;
      source?: string;
      /** Reserve then settle: the units reserved (also `cost`). */
      estimate?: number;
      /** The actual cost the reservation was settled with. */
      actual?: number;
      /** The settled difference, actual - estimate as applied: negative given back, positive charged; 0 when nothing was applied. */
      delta?: number;
      /** How the settlement ended ('failed': the service refused it; see the log). */
      settlement?: 'settled' | 'already_settled' | 'not_counted' | 'unavailable' | 'failed';
    };
    /** Tools with a cap on calls in flight only. */
    concurrency?: {
      outcome: ConcurrencyOutcome;
      policy: string;
      source?: string;
      deniedBy?: string;
      retryAfterMs?: number;
      /** How the lease ended: released when the call ended, or why not ('failed': the release itself failed). */
      release?: 'released' | 'not_held' | 'not_counted' | 'unavailable' | 'failed';
      /** The lease was lost while the call ran (not renewed in time): the cap did not cover all of it. */
      lost?: boolean;
    };
  };
  result: ResultStatus;
  /** Why a step refused, in words (never includes argument values). */
  reason?: string;
  durationMs: number;
}

/** Where audit records go. Writes are awaited before the tool result is returned. */
export interface AuditSink {
  write(record: AuditRecord): Promise<void>;
}

/**
 * The default sink: one JSON object per line on the process's stderr (never stdout,
 * which is the protocol channel on stdio). A host or supervisor keeps stderr; give a
 * file or a sink of your own to keep the records apart.
 */
export class StderrAuditSink implements AuditSink {
  write(record: AuditRecord): Promise<void> {
    return new Promise((resolve, reject) => {
      process.stderr.write(`${JSON.stringify(record)}\n`, (error) => (error ? reject(error) : resolve()));
    });
  }
}

/** Sinks whose last write failed: their next failures are not logged again. */
const failingSinks = new WeakSet<AuditSink>();

/**
 * Writes a record and never throws: a broken sink must not turn every call into an
 * error. Its first failure is logged as one line (where, and why), not a stack per
 * call; the next failures stay quiet until a write succeeds again, which is logged too.
 */
export async function writeAuditRecord(
  sink: AuditSink,
  record: AuditRecord,
  logger: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void },
): Promise<void> {
  try {
    await sink.write(record);
    if (failingSinks.delete(sink)) logger.warn({ audit: auditTarget(sink) }, 'audit records are written again');
  } catch (error) {
    if (failingSinks.has(sink)) return;
    failingSinks.add(sink);
    const reason = error instanceof Error ? error.message : String(error);
    logger.error(
      { audit: auditTarget(sink), reason },
      `audit records cannot be written to ${auditTarget(sink)}: ${reason}; tool calls go on unaudited, and this is logged once until a write succeeds`,
    );
  }
}

function auditTarget(sink: AuditSink): string {
  return sink instanceof JsonLinesAuditSink ? sink.path : sink instanceof StderrAuditSink ? 'stderr' : sink.constructor.name;
}

/** A sink that appends one JSON object per line to a file. */
export class JsonLinesAuditSink implements AuditSink {
  constructor(readonly path: string) {}

  async write(record: AuditRecord): Promise<void> {
    // One appendFile per record: each line lands whole (O_APPEND), and the file
    // can be rotated between calls without reopening anything.
    await appendFile(this.path, `${JSON.stringify(record)}\n`, { encoding: 'utf8', mode: 0o600 });
  }
}

/**
 * Default redaction: keep the argument names, replace every value. Arguments are
 * model-written and may carry personal data or secrets pasted into a prompt.
 */
export function redactArgumentValues(args: unknown): unknown {
  if (args === undefined || args === null || typeof args !== 'object' || Array.isArray(args)) {
    return args === undefined ? undefined : '[redacted]';
  }
  return Object.fromEntries(Object.keys(args).map((key) => [key, '[redacted]']));
}
