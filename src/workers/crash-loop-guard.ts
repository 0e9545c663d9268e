/** How many unexpected worker exits are restarted within a window before the primary gives up. */
export const CRASH_LOOP = { restarts: 3, windowMs: 60_000 } as const;

/**
 * Decides, per unexpected worker exit, whether to start a replacement: yes while at
 * most `restarts` exits fall within the last `windowMs`, no from the one after (a
 * worker that keeps dying, say from a bad file or an exhausted resource, is a crash
 * loop better ended whole, so the orchestrator sees it and backs off).
 */
export class CrashLoopGuard {
  private readonly exits: number[] = [];

  constructor(
    private readonly now: () => number,
    private readonly limits: { restarts: number; windowMs: number } = CRASH_LOOP,
  ) {}

  /** Records an unexpected exit; true when a replacement may start. */
  exited(): boolean {
    const at = this.now();
    this.exits.push(at);
    while (this.exits.length > 0 && this.exits[0]! <= at - this.limits.windowMs) this.exits.shift();
    return this.exits.length <= this.limits.restarts;
  }
}
