import { createHash } from 'node:crypto';

export interface StoredOutcome {
  status: number;
  body: unknown;
}

type Entry = { state: 'pending'; fingerprint: string; expiresAt: number } | { state: 'done'; fingerprint: string; outcome: StoredOutcome; expiresAt: number };

export type Lookup = { kind: 'new' } | { kind: 'replay'; outcome: StoredOutcome } | { kind: 'in_progress' } | { kind: 'mismatch' };

/** Outcomes are kept this long; a retry after that is a new request. */
const TTL_MS = 24 * 60 * 60 * 1000;

/**
 * Idempotency-Key: the first outcome of a POST per (user, key), replayed for
 * retries with the same body. Per process (the demo's store is in memory too);
 * a real service keeps it beside its orders, in the same transaction.
 */
export class IdempotencyStore {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly now: () => number = Date.now) {}

  lookup(scope: string, key: string, body: unknown): Lookup {
    const entry = this.live(id(scope, key));
    if (entry === undefined) return { kind: 'new' };
    if (entry.fingerprint !== fingerprint(body)) return { kind: 'mismatch' };
    return entry.state === 'done' ? { kind: 'replay', outcome: entry.outcome } : { kind: 'in_progress' };
  }

  /** Claims the key for a request about to run; false if another got there first. */
  begin(scope: string, key: string, body: unknown): boolean {
    const k = id(scope, key);
    if (this.live(k) !== undefined) return false;
    this.entries.set(k, { state: 'pending', fingerprint: fingerprint(body), expiresAt: this.now() + TTL_MS });
    return true;
  }

  finish(scope: string, key: string, outcome: StoredOutcome): void {
    const k = id(scope, key);
    const entry = this.entries.get(k);
    if (entry !== undefined) this.entries.set(k, { state: 'done', fingerprint: entry.fingerprint, outcome, expiresAt: this.now() + TTL_MS });
  }

  /** The request did not run to an outcome (e.g. overloaded): a retry may run it. */
  abandon(scope: string, key: string): void {
    this.entries.delete(id(scope, key));
  }

  private live(k: string): Entry | undefined {
    const entry = this.entries.get(k);
    if (entry !== undefined && entry.expiresAt <= this.now()) {
      this.entries.delete(k);
      return undefined;
    }
    return entry;
  }
}

function id(scope: string, key: string): string {
  return `${scope}\n${key}`;
}

function fingerprint(body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}
