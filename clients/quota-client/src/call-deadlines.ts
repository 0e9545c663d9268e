/** A call with a deadline: when it passes (performance.now()), and whether the call is settled already. */
export interface Deadlined {
  readonly deadlineAt: number;
  readonly done: boolean;
}

/**
 * The deadlines of many calls on one timer, set for the earliest one still
 * waiting, instead of a timer made and cleared per call. Calls are kept in
 * deadline order: with one deadline for every call (the usual case) that is
 * the order they came, so a call is added at the end and, once settled,
 * leaves from the front, both at no cost; a call with an earlier deadline
 * than the last one is put in its place. When the timer fires, every
 * waiting call whose deadline has passed is handed to `expire`, and the
 * timer is set for the next. The timer never keeps the process alive.
 */
export class CallDeadlines<T extends Deadlined> {
  /**
   * Calls in deadline order, from `head` on: settled ones leave once they
   * reach the front. A slot left behind is cleared at once, so that a settled
   * call is not held till the next compaction.
   */
  private calls: Array<T | undefined> = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (performance.now()); Infinity when none is set. */
  private timerAt = Number.POSITIVE_INFINITY;

  constructor(private readonly expire: (call: T) => void) {}

  add(call: T): void {
    const calls = this.calls;
    const last = calls.length > this.head ? calls[calls.length - 1]! : undefined;
    if (last === undefined || last.deadlineAt <= call.deadlineAt) calls.push(call);
    else calls.splice(this.placeOf(call.deadlineAt), 0, call);
    // A timer set for later fires late for this one; one set earlier sets itself again when it fires.
    if (call.deadlineAt < this.timerAt) this.arm(call.deadlineAt);
  }

  /** A call settled: the settled ones at the front leave, so settled calls are not kept till their deadline. */
  settled(): void {
    const calls = this.calls;
    while (this.head < calls.length && calls[this.head]!.done) calls[this.head++] = undefined;
    this.compact();
  }

  /** Calls held (waiting, or settled behind one that waits): for tests. */
  get size(): number {
    return this.calls.length - this.head;
  }

  /** The first place from the front whose deadline is later than `at` (binary search). */
  private placeOf(at: number): number {
    let low = this.head;
    let high = this.calls.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.calls[middle]!.deadlineAt <= at) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** Drops the front's empty slots once they are most of the array. */
  private compact(): void {
    if (this.head === this.calls.length) {
      this.calls.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.calls.length) {
      this.calls = this.calls.slice(this.head);
      this.head = 0;
    }
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timerAt = at;
    // Whole ms, at least 1: it may fire a little before `at` by performance.now(); then it is set for the rest.
    this.timer = setTimeout(this.onTimer, Math.max(1, Math.ceil(at - performance.now())));
    this.timer.unref();
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    const calls = this.calls;
    while (this.head < calls.length) {
      const first = calls[this.head]!;
      if (!first.done && first.deadlineAt > now) break;
      calls[this.head++] = undefined;
      if (!first.done) this.expire(first);
    }
    this.compact();
    if (this.head < this.calls.length) this.arm(this.calls[this.head]!.deadlineAt);
  };
}
