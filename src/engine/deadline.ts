/** The store answered nothing for the whole budget while the call waited. */
export class StoreTimeoutError extends Error {
  override name = 'StoreTimeoutError';
}

/** A deadline some store calls race against; release() once the call is over, win or lose. */
export interface Deadline {
  /**
   * Settles as `promise` does, or rejects with StoreTimeoutError once the
   * store's `partition` has been silent (calls outstanding, none answered) for
   * the whole budget.
   */
  race<T>(promise: Promise<T>, partition: string): Promise<T>;
  release(): void;
}

/**
 * How long (ms) a partition of the store has had calls outstanding without
 * answering any (StoreParts.silentForMs). Undefined: silence is not measured,
 * and a call counts as unanswered from the moment it is made.
 */
export type SilenceProbe = ((partition: string) => number) | undefined;

/**
 * Deadlines of `ms`, one timer per turn of the event loop rather than one per
 * call. An AllowBatch starts the store calls of all its requests in one
 * synchronous run; a timer, a timeout promise and two Promise.race per request
 * would cost more than the rest of the deadline's work.
 *
 * The budget bounds the store's silence, not the wait: when the timer fires,
 * a call fails only if its partition of the store has answered nothing for
 * `ms` while calls were outstanding. A store that keeps answering (busy with
 * a large batch, or with calls queued before this one) keeps its calls; so
 * does time spent in this process, because the check runs after the event
 * loop has read whatever answers arrived while it was busy (setImmediate
 * after the timer: the poll phase comes between), and the time the timer
 * fired late (this process could not run: a busy loop, a starved CPU) is not
 * held against the store. Otherwise the timer is set again for the rest of
 * the budget. A store without a probe of its silence gets no such allowance:
 * its calls fail when the timer fires, however late.
 */
export class TurnDeadlines {
  private current: SharedDeadline | undefined;
  /**
   * The last deadline all its calls released before its timer fired: the next
   * turn's deadline is that one again, its timer set anew (Timeout.refresh)
   * rather than a timer made and cleared per turn.
   */
  private spare: SharedDeadline | undefined;
  /** Keeps `deadline` as the spare unless there is one already (then its timer is cleared by the caller). */
  private readonly recycle = (deadline: SharedDeadline): boolean => {
    if (this.spare !== undefined) return false;
    this.spare = deadline;
    return true;
  };

  constructor(
    private readonly ms: number,
    private readonly silentFor: () => SilenceProbe = () => undefined,
  ) {}

  start(): Deadline {
    let deadline = this.current;
    // A released or expired deadline is never joined: a call always gets at least the time left of a live one.
    if (deadline === undefined || !deadline.joinable()) {
      const spare = this.spare;
      this.spare = undefined;
      if (spare === undefined) deadline = new SharedDeadline(this.ms, this.silentFor(), this.recycle);
      else deadline = spare.renew(this.silentFor());
      this.current = deadline;
      const started = deadline;
      // Microtasks run once the current synchronous run is over: the next turn's calls get a deadline of their own.
      queueMicrotask(() => {
        if (this.current === started) this.current = undefined;
      });
    }
    deadline.refs++;
    return deadline;
  }
}

let takenResolve: ((value: unknown) => void) | undefined;
let takenReject: ((error: Error) => void) | undefined;
/** A Promise executor runs synchronously inside `new Promise`: the next line reads what it took. */
function takeSettlers(resolve: (value: never) => void, reject: (error: Error) => void): void {
  takenResolve = resolve as (value: unknown) => void;
  takenReject = reject;
}

class SharedDeadline implements Deadline {
  refs = 0;
  /** Per call raced: its reject, and the partition it waits on. Undefined once rejected. */
  private rejects: Array<((error: Error) => void) | undefined> = [];
  private partitions: string[] = [];
  private expired: StoreTimeoutError | undefined;
  private fired = false;
  private armed = true;
  /** When the timer should fire: how late it did is time this process could not run. */
  private dueAt: number;
  private timer: NodeJS.Timeout;
  /** The timer is set for the whole budget (not for the rest of one, by arm): renew can set it again. */
  private fullBudget = true;

  constructor(
    private readonly ms: number,
    private silentFor: SilenceProbe,
    /** Offered this deadline once every call released it before its timer fired: true if taken, for renew(). */
    private readonly recycle: (deadline: SharedDeadline) => boolean,
  ) {
    this.dueAt = performance.now() + ms;
    this.timer = setTimeout(this.onTimer, ms);
  }

  /** This deadline as a fresh one: a full budget from now, on the same timer. Only after recycle. */
  renew(silentFor: SilenceProbe): this {
    this.silentFor = silentFor;
    this.armed = true;
    this.dueAt = performance.now() + this.ms;
    // Set again from now; it keeps the process alive again while calls wait on it.
    this.timer.refresh().ref();
    return this;
  }

  joinable(): boolean {
    return this.refs > 0 && !this.fired;
  }

  race<T>(promise: Promise<T>, partition: string): Promise<T> {
    // Raced after the timer found nothing left to wait for (a call waiting for a
    // breaker probe, say): the timer goes again, for what is left of the budget.
    if (!this.armed) this.arm(this.ms - this.silence(partition));
    // The settle functions are taken by one shared executor, not a closure per call.
    const raced = new Promise<T>(takeSettlers);
    const resolve = takenResolve as (value: T) => void;
    const reject = takenReject!;
    // Not kept past this call: they would hold its promise.
    takenResolve = takenReject = undefined;
    this.rejects.push(reject);
    this.partitions.push(partition);
    promise.then(resolve, reject);
    return raced;
  }

  release(): void {
    if (--this.refs > 0) return;
    // The calls are over; their settled promises need not be kept.
    this.rejects = [];
    this.partitions = [];
    // Unfired: it may serve the next turn. Till then its timer holds no process open, and fires for nothing.
    if (!this.fired && this.fullBudget && this.recycle(this)) this.timer.unref();
    else clearTimeout(this.timer);
  }

  private arm(ms: number): void {
    const delay = Math.max(1, Math.ceil(ms));
    this.armed = true;
    this.fullBudget = false;
    this.dueAt = performance.now() + delay;
    this.timer = setTimeout(this.onTimer, delay);
  }

  /** The partition's silence; without a probe, as if silent since the call was made. */
  private silence(partition: string): number {
    return this.silentFor === undefined ? this.ms : this.silentFor(partition);
  }

  private readonly onTimer = (): void => {
    // A spare's timer: nobody waits on it (renew sets it again).
    if (this.refs <= 0) return;
    this.fired = true;
    this.armed = false;
    // After the poll phase: answers that arrived while the event loop was busy are read first.
    setImmediate(this.check);
  };

  private readonly check = (): void => {
    if (this.refs <= 0) return;
    // A timer that fires late means this process could not run (a busy event
    // loop, a starved CPU): that time is not held against a store whose silence
    // is measured.
    const late = Math.max(0, performance.now() - this.dueAt);
    let wait = Number.POSITIVE_INFINITY;
    // One reading per partition: calls raced on the same partition (a breaker's
    // inner call and the caller's outer race, say) expire together, never the
    // outer first with the inner a moment later, after a caller's retry.
    const silences = new Map<string, number>();
    for (let i = 0; i < this.rejects.length; i++) {
      const reject = this.rejects[i];
      if (reject === undefined) continue;
      const partition = this.partitions[i]!;
      let silent = silences.get(partition);
      if (silent === undefined) {
        // Without a probe nothing tells whether the store answered while this process
        // could not run: the whole wait counts against it, a late timer included.
        silent = this.silentFor === undefined ? this.ms : this.silentFor(partition) - late;
        silences.set(partition, silent);
      }
      if (silent >= this.ms) {
        this.expired ??= new StoreTimeoutError(`store answered nothing for ${this.ms} ms`);
        this.rejects[i] = undefined;
        // A call that settled meanwhile ignores this.
        reject(this.expired);
      } else {
        wait = Math.min(wait, this.ms - silent);
      }
    }
    if (wait !== Number.POSITIVE_INFINITY) this.arm(wait);
  };
}
