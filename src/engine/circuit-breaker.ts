/** The circuit was open: the call was not made. */
export class CircuitOpenError extends Error {
  override name = 'CircuitOpenError';
}

/**
 * One error for every call refused while the circuit is open: during an
 * outage every call is refused, and a new error (its stack trace captured)
 * per call would cost more than answering it by its failure mode.
 */
const CIRCUIT_OPEN = new CircuitOpenError('the circuit is open');

export type CircuitStateName = 'closed' | 'open' | 'half_open';

export interface CircuitBreakerOptions {
  /** Consecutive counted failures that open the circuit. */
  failures: number;
  /** How long an open circuit waits before one probe call is let through. */
  halfOpenAfterMs: number;
  /** The errors that count as failures; any other error propagates and, for the breaker, the call went through. */
  counts: (error: unknown) => boolean;
  /** The circuit opened (again, after a failed probe), with the failure that did it. */
  onBreak: (error: unknown) => void;
  /** A probe went through: the circuit closed. */
  onReset: () => void;
  /** After every change of state. */
  onStateChange: (state: CircuitStateName) => void;
}

/**
 * A consecutive-failure circuit breaker with one probe call when half-open,
 * as cockatiel's circuitBreaker with a ConsecutiveBreaker and a constant
 * halfOpenAfter behaves (the same states, counting, events and their order),
 * which the failure policy used before: cockatiel's execute and its executor
 * are two async functions and a result object per call, garbage this one does
 * not make.
 * Closed, a call costs one `then` with handlers made once per breaker.
 *
 * Closed: calls go through; `failures` counted failures in a row open the
 * circuit, any call that goes through resets the count. Open: calls fail with
 * CircuitOpenError without being made until `halfOpenAfterMs` has passed; the
 * next call is then the probe (half-open), and calls meanwhile wait for it and
 * then go as it left the circuit. A probe that goes through closes the circuit;
 * one that fails opens it again for another `halfOpenAfterMs`.
 */
export class CircuitBreaker {
  private current: CircuitStateName = 'closed';
  private consecutive = 0;
  private openedAt = 0;
  /** The failure counted last: the same error again (another call it failed) is not counted again. */
  private lastCounted: unknown;
  /** The half-open probe, settled (never rejected) once it and its effect on the circuit are over. */
  private probe: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: CircuitBreakerOptions) {}

  get state(): CircuitStateName {
    return this.current;
  }

  execute<T>(fn: () => Promise<T>): Promise<T> {
    switch (this.current) {
      case 'closed':
        return attempt(fn).then(this.wentThrough, this.failedClosed);
      case 'half_open':
        return this.probe.then(() => this.execute(fn));
      case 'open':
        if (Date.now() - this.openedAt < this.options.halfOpenAfterMs) return Promise.reject(CIRCUIT_OPEN);
        return this.halfOpen(fn);
    }
  }

  /**
   * execute(fn).then(onValue, onError) in one step: closed, the call's outcome
   * is counted and handed on in the same `then`, one promise instead of two
   * (a decision's promise chain was the top of the service's CPU profile).
   */
  run<T, R>(fn: () => Promise<T>, onValue: (value: T) => R, onError: (error: unknown) => R | Promise<R>): Promise<R> {
    if (this.current !== 'closed') return this.execute(fn).then(onValue, onError);
    return attempt(fn).then(
      (value) => {
        this.succeeded();
        return onValue(value);
      },
      (error: unknown) => {
        this.failed(error);
        return onError(error);
      },
    );
  }

  /**
   * A call made while closed went through: what execute() records for it. For
   * calls the caller makes itself, several answered together (the failure
   * policy's decideTogether), counted one by one in order as execute() would.
   */
  succeeded(): void {
    this.consecutive = 0;
  }

  /**
   * A call made while closed failed: what execute() records for it (see
   * succeeded). One failure counts once, however many calls it failed: the
   * calls of one timed-out store call or deadline share their error, so a
   * single large batch is one failure, not a thousand.
   */
  failed(error: unknown): void {
    if (error === this.lastCounted || !this.options.counts(error)) return;
    this.lastCounted = error;
    // A call started while closed may end after the circuit opened: it counts, and opens nothing twice.
    if (++this.consecutive >= this.options.failures) this.open(error);
  }

  private readonly wentThrough = <T>(value: T): T => {
    this.succeeded();
    return value;
  };

  private readonly failedClosed = (error: unknown): never => {
    this.failed(error);
    throw error;
  };

  private halfOpen<T>(fn: () => Promise<T>): Promise<T> {
    const test = attempt(fn).then(
      (value) => {
        this.consecutive = 0;
        this.close();
        return value;
      },
      (error: unknown) => {
        if (this.options.counts(error)) {
          this.consecutive++;
          this.open(error);
        } else {
          this.close();
        }
        throw error;
      },
    );
    this.current = 'half_open';
    this.probe = test.catch(() => undefined);
    this.options.onStateChange('half_open');
    return test;
  }

  private open(error: unknown): void {
    if (this.current === 'open') return;
    this.current = 'open';
    this.openedAt = Date.now();
    this.options.onBreak(error);
    this.options.onStateChange('open');
  }

  private close(): void {
    if (this.current !== 'half_open') return;
    this.current = 'closed';
    this.options.onReset();
    this.options.onStateChange('closed');
  }
}

/** fn's promise; a synchronous throw becomes its rejection, so it is counted like any failure. */
function attempt<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return fn();
  } catch (error) {
    return Promise.reject(error);
  }
}
