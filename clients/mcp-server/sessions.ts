import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/** Idle time after which a session is closed, unless configured (MCP_SESSION_IDLE_TIMEOUT_MS). */
export const DEFAULT_SESSION_IDLE_TIMEOUT_MS = 15 * 60_000;
/** Open sessions one principal may hold, unless configured (MCP_MAX_SESSIONS_PER_PRINCIPAL). */
export const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL = 16;

export interface Session {
  readonly id: string;
  readonly transport: StreamableHTTPServerTransport;
  /** Who opened the session: another principal must not ride on its id. */
  readonly owner: string;
  /** When the last request ended (or the session opened). */
  lastActiveMs: number;
  /** Requests of this session still running: a busy session never expires. */
  busy: number;
}

/** A slot reserved for a session being initialized: bound once the transport has its id, else released. */
export interface Reservation {
  bind(id: string, transport: StreamableHTTPServerTransport): void;
  release(): void;
}

/**
 * The open MCP sessions, with two limits: a session idle for `idleTimeoutMs` (no
 * request running, none started since) is closed, and one principal holds at
 * most `maxPerPrincipal` sessions. Time comes from `now`, so tests move it.
 * An open GET stream does not count as activity: requests do.
 */
export class SessionRegistry {
  private readonly sessions = new Map<string, Session>();
  private readonly byOwner = new Map<string, Set<Session>>();
  /** Initializations under way per owner: they hold a slot, so concurrent ones cannot pass the cap. */
  private readonly opening = new Map<string, number>();

  constructor(
    private readonly limits: { idleTimeoutMs: number; maxPerPrincipal: number },
    private readonly now: () => number,
    private readonly onCloseError: (error: unknown) => void,
  ) {}

  /** The live session with this id; an expired one is closed and reported absent. */
  find(id: string): Session | undefined {
    const session = this.sessions.get(id);
    if (session === undefined || !this.expired(session)) return session;
    this.expire(session);
    return undefined;
  }

  /** Holds the session busy while a request runs; call the result when it ended. */
  begin(session: Session): () => void {
    session.busy++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      session.busy--;
      session.lastActiveMs = this.now();
    };
  }

  /**
   * Reserves a slot for a new session of `owner`, after closing expired sessions.
   * At the cap: the milliseconds until the owner's first session would expire if left idle.
   */
  reserve(owner: string): Reservation | { retryAfterMs: number } {
    this.sweep();
    const open = this.byOwner.get(owner);
    const opening = this.opening.get(owner) ?? 0;
    if ((open?.size ?? 0) + opening >= this.limits.maxPerPrincipal) {
      let retryAfterMs = this.limits.idleTimeoutMs;
      for (const session of open ?? []) {
        if (session.busy === 0) retryAfterMs = Math.min(retryAfterMs, session.lastActiveMs + this.limits.idleTimeoutMs - this.now());
      }
      return { retryAfterMs: Math.max(0, retryAfterMs) };
    }
    this.opening.set(owner, opening + 1);
    let held = true;
    const free = () => {
      if (!held) return;
      held = false;
      const left = (this.opening.get(owner) ?? 1) - 1;
      if (left === 0) this.opening.delete(owner);
      else this.opening.set(owner, left);
    };
    return {
      bind: (id, transport) => {
        free();
        const session: Session = { id, transport, owner, lastActiveMs: this.now(), busy: 0 };
        this.sessions.set(id, session);
        const owned = this.byOwner.get(owner) ?? new Set();
        owned.add(session);
        this.byOwner.set(owner, owned);
      },
      release: free,
    };
  }

  /** Forgets a session whose transport closed (DELETE, expiry, shutdown). */
  remove(id: string): void {
    const session = this.sessions.get(id);
    if (session === undefined) return;
    this.sessions.delete(id);
    const owned = this.byOwner.get(session.owner);
    owned?.delete(session);
    if (owned?.size === 0) this.byOwner.delete(session.owner);
  }

  /** Closes every expired session. */
  sweep(): void {
    for (const session of this.sessions.values()) if (this.expired(session)) this.expire(session);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.transport.close()));
  }

  private expired(session: Session): boolean {
    return session.busy === 0 && this.now() - session.lastActiveMs >= this.limits.idleTimeoutMs;
  }

  private expire(session: Session): void {
    this.remove(session.id);
    session.transport.close().catch(this.onCloseError);
  }
}
