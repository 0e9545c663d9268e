/**
 * The script calls on their way to one partition of Redis (the node, or one
 * master of a cluster): how many decisions are outstanding, and how long the
 * partition has kept silent.
 *
 * Redis runs every command of one read before it writes any reply, so
 * decisions sent all at once keep it busy, and silent, for as long as they
 * all take. At most `capacity` decisions are outstanding; more wait here, in
 * this process, until answers come back. The silence Redis can show while it
 * works through what it was sent stays a few milliseconds, far below the
 * store budget, and a silence longer than the budget means a store that is
 * down, not busy (src/engine/deadline.ts).
 */
export class PartitionTraffic {
  private outstanding = 0;
  private calls = 0;
  /** The last answer, or the first send after a time with nothing outstanding. */
  private since = 0;
  private readonly waiting: Array<{ weight: number; start: () => void }> = [];

  constructor(private readonly capacity: number) {}

  /** Sends a call of `weight` decisions when the window has room: at once, or after earlier calls are answered. */
  send<T>(weight: number, call: () => Promise<T>): Promise<T> {
    if (this.waiting.length === 0 && this.fits(weight)) return this.start(weight, call);
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ weight, start: () => void this.start(weight, call).then(resolve, reject) });
    });
  }

  /** Milliseconds without an answer while calls were outstanding; 0 with nothing outstanding. */
  silentForMs(): number {
    return this.calls === 0 ? 0 : performance.now() - this.since;
  }

  /** A call heavier than the whole window still goes, alone. */
  private fits(weight: number): boolean {
    return this.calls === 0 || this.outstanding + weight <= this.capacity;
  }

  private start<T>(weight: number, call: () => Promise<T>): Promise<T> {
    if (this.calls++ === 0) this.since = performance.now();
    this.outstanding += weight;
    let sent: Promise<T>;
    try {
      sent = call();
    } catch (error) {
      sent = Promise.reject(error);
    }
    // Not finally(): it makes two more promises per call.
    return sent.then(
      (value) => {
        this.answered(weight);
        return value;
      },
      (error: unknown) => {
        this.answered(weight);
        throw error;
      },
    );
  }

  /** Any answer, a reply or an error, is a sign of life; it makes room for calls waiting here. */
  private answered(weight: number): void {
    this.calls--;
    this.outstanding -= weight;
    this.since = performance.now();
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.weight)) this.waiting.shift()!.start();
  }
}
