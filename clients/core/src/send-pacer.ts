/**
 * How a batcher paces what it sends (the quota client's batches, the
 * service's script rounds): `inFlight` batches at most unanswered at once;
 * `burst`, the fewest calls queued in one turn that go beside a batch in
 * flight; `holdMs`, the longest calls wait behind batches in flight (a slow
 * answer does not hold back the calls behind it longer than that); `split`,
 * whether one turn's calls that find nothing in flight may go as several
 * batches (worth it only where each batch's callers are answered apart).
 */
export interface Pacing {
  inFlight: number;
  burst: number;
  holdMs: number;
  split: boolean;
}

export const PACING: Pacing = { inFlight: 2, burst: 2, holdMs: 2, split: true };

/**
 * When a batcher's queue goes, and in how many batches. A turn ends when its
 * synchronous work and promise reactions are done (process.nextTick after
 * them, before any I/O or timer); what a turn queued goes then, together:
 *
 * - with no batch in flight, everything queued goes at once: alone, a call
 *   waits for nothing. With `split`, when it all came in this one turn and
 *   holds at least `burst` calls twice, it goes as two batches (up to `inFlight`), answered
 *   apart: callers answered together call again together, and with one batch
 *   in flight the caller, the service and Redis would each wait while another
 *   works; two batches, each turn's callers apart, keep them working at once;
 * - behind a batch in flight, `burst` or more calls queued in one turn (the
 *   callers an answer released calling again, or one message's decisions) go
 *   at its end as one more batch, up to `inFlight`; calls queued alone wait,
 *   so that under load batches grow rather than multiply, and go with the next
 *   batch, when a batch answers, or `holdMs` later at the latest.
 *
 * The batcher owns its queue: `queued` counts it, `send(parts)` sends all of
 * it in that many batches (calling flushing() first), and each batch sent is
 * counted with sent(), whose function counts it answered.
 */
export class SendPacer {
  private unanswered = 0;
  private turnEndScheduled = false;
  private holdTimer: ReturnType<typeof setTimeout> | undefined;
  /** Calls queued that an earlier turn's end held back. */
  private heldBack = 0;
  /** A batch answered while calls were queued: they go at the turn's end. */
  private answered = false;

  constructor(
    private readonly queued: () => number,
    private readonly send: (parts: number) => void,
    private readonly pacing: Pacing = PACING,
  ) {}

  /** After calls are queued: they go at the turn's end, or wait behind the batches in flight. */
  schedule(): void {
    if (this.turnEndScheduled || this.queued() === 0) return;
    if (this.unanswered < this.pacing.inFlight) {
      this.turnEndScheduled = true;
      process.nextTick(this.atTurnEnd);
    } else {
      this.holdTimer ??= setTimeout(this.sendHeld, this.pacing.holdMs);
    }
  }

  /** The batcher is sending its whole queue now: nothing is held back any more. */
  flushing(): void {
    clearTimeout(this.holdTimer);
    this.holdTimer = undefined;
    this.heldBack = 0;
    this.answered = false;
  }

  /** Counts a batch in flight; the function it returns counts it answered (once) and lets the queue go. */
  sent(): () => void {
    this.unanswered++;
    let landed = false;
    return () => {
      if (landed) return;
      landed = true;
      this.unanswered--;
      if (this.queued() > 0) this.answered = true;
      this.schedule();
    };
  }

  private readonly atTurnEnd = (): void => {
    this.turnEndScheduled = false;
    const queued = this.queued();
    if (queued === 0) return;
    const thisTurn = queued - this.heldBack;
    if (this.unanswered > 0 && !this.answered && thisTurn < this.pacing.burst) {
      this.heldBack = queued;
      this.holdTimer ??= setTimeout(this.sendHeld, this.pacing.holdMs);
      return;
    }
    const splits = this.pacing.split && this.unanswered === 0 && thisTurn === queued;
    this.send(splits ? Math.max(1, Math.min(this.pacing.inFlight, Math.floor(queued / this.pacing.burst))) : 1);
  };

  private readonly sendHeld = (): void => {
    this.holdTimer = undefined;
    this.send(1);
  };
}
