/** The store did not answer within the budget. */
export class StoreTimeoutError extends Error {
  override name = 'StoreTimeoutError';
}

/** A deadline some store calls race against; release() once the call is over, win or lose. */
export interface Deadline {
  /** Settles as `promise` does, or rejects with StoreTimeoutError when the deadline passes first. */
  race<T>(promise: Promise<T>): Promise<T>;
  release(): void;
}

/**
 * Deadlines of `ms`, one timer per turn of the event loop rather than one per
 * call. An AllowBatch starts the store calls of all its requests in one
 * synchronous run; a timer, a timeout promise and two Promise.race per request
 * were a measurable share of the service's CPU per decision (docs/benchmarks.md).
 * The calls of one turn share one deadline, armed by the first of them: each
 * call's wait is bounded by its own budget (the later ones of a turn by a
 * little less, the time the turn took to reach them), and on expiry each call
 * still gets its own timeout, hence its own failure-mode answer.
 */
export class TurnDeadlines {
  private current: SharedDeadline | undefined;

  constructor(private readonly ms: number) {}

  start(): Deadline {
    let deadline = this.current;
    // A released or expired deadline is never joined: a call always gets at least the time left of a live one.
    if (deadline === undefined || !deadline.joinable()) {
      deadline = new SharedDeadline(this.ms);
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
  private rejects: Array<(error: Error) => void> = [];
  private expired: StoreTimeoutError | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly ms: number) {
    this.timer = setTimeout(() => this.expire(), ms);
  }

  joinable(): boolean {
    return this.refs > 0 && this.expired === undefined;
  }

  race<T>(promise: Promise<T>): Promise<T> {
    const expired = this.expired;
    if (expired !== undefined) {
      // As Promise.race would: the loser's rejection is handled, never reported as unhandled.
      promise.catch(() => {});
      return Promise.reject(expired);
    }
    // The settle functions are taken by one shared executor, not a closure per call.
    const raced = new Promise<T>(takeSettlers);
    const resolve = takenResolve as (value: T) => void;
    const reject = takenReject!;
    // Not kept past this call: they would hold its promise.
    takenResolve = takenReject = undefined;
    this.rejects.push(reject);
    promise.then(resolve, reject);
    return raced;
  }

  release(): void {
    if (--this.refs > 0) return;
    clearTimeout(this.timer);
    // The calls are over; their settled promises need not be kept.
    this.rejects = [];
  }

  private expire(): void {
    this.expired = new StoreTimeoutError(`store did not answer within ${this.ms} ms`);
    const rejects = this.rejects;
    this.rejects = [];
    for (const reject of rejects) reject(this.expired);
  }
}
