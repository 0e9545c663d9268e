import type { LimitOutcome } from '../algorithms/outcome.js';
import type { LimitCall } from '../types.js';
import { countDecision, grantUnits, isHot, type KeyState, newKeyState, type Slice, unitsLeft } from './key-state.js';
import type { SliceAnswer, SliceOp } from './slice-model.js';

/**
 * A holder of slices (docs/policies.md, "Slices"): the quota client in a
 * caller's process, or the service for its own callers. It counts the
 * decisions it sees per limit and identity; once one has seen more than
 * `threshold` decisions within a slice's ttl it takes a slice of that limit
 * from the shared store (in the background: the decision that tipped it
 * still goes to the store), and decides the next requests from the slice,
 * locally, until the slice runs dry or its ttl ends. Then the next decision
 * goes to the store again (the shared state is the truth: a slice never
 * denies on its own), and the unused units go back: at the ttl, at close,
 * or with the next take, in the same call.
 *
 * A busy key does not wait for its next slice: once half of a slice is
 * granted, the next one is taken in the background, and the rest of the
 * current one (its tail) is granted first. A tail is not given back (its
 * record in the store is replaced by the new slice's): what it has not
 * granted by its end lapses. A holder so holds at most one and a half
 * slices of a key.
 *
 * I/O-free: the store is reached through `SliceSource`, time through `SliceTimers`.
 */

/** How a holder reaches the shared store's slice step. */
export interface SliceSource {
  /** `take` gives back `giveBack` units of the holder's previous slice of this limit and identity, then takes anew; `give-back` only gives back. */
  slice(call: LimitCall, op: SliceOp, giveBack: number): Promise<SliceAnswer>;
}

/** The holder's clock and timers (the system's by default; tests use virtual ones). */
export interface SliceTimers {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** What a holder did, for metrics (counters: they only grow). */
export interface SliceCounters {
  /** Slices taken (a take that took at least one unit). */
  slicesTaken: number;
  /** Units taken into slices. */
  unitsTaken: number;
  /** Units granted from slices, without asking the store. */
  unitsGrantedLocally: number;
  /** Unused units the store took back. */
  unitsReturned: number;
  /** Unused units that did not go back (the record had lapsed, the window was over, or the call failed): lost for that slice's time. */
  unitsLapsed: number;
}

/**
 * A holder takes a slice of a limit and identity once it has seen more than
 * this many decisions of it within one slice ttl. Below it, a slice would
 * cost about as many store calls (a take and a give-back) as it saves, while
 * keeping units from the other holders.
 */
export const DEFAULT_SLICE_THRESHOLD = 10;

/** The next slice is taken once a slice has this share of its units left (or less). */
const TAKE_NEXT_AT = 0.5;

const systemTimers: SliceTimers = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    timer.unref?.();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface SliceHolderOptions {
  /** Decisions per ttl after which a slice is taken (DEFAULT_SLICE_THRESHOLD). */
  threshold?: number;
  timers?: SliceTimers;
  /** Told of a take or give-back that failed (the units it held lapse). */
  onError?: (error: unknown) => void;
}

export class SliceHolder {
  readonly counters: SliceCounters = { slicesTaken: 0, unitsTaken: 0, unitsGrantedLocally: 0, unitsReturned: 0, unitsLapsed: 0 };
  private readonly threshold: number;
  private readonly timers: SliceTimers;
  private readonly states = new Map<string, KeyState>();
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;
  private sweptAt: number;

  constructor(
    private readonly source: SliceSource,
    private readonly options: SliceHolderOptions = {},
  ) {
    this.threshold = options.threshold ?? DEFAULT_SLICE_THRESHOLD;
    this.timers = options.timers ?? systemTimers;
    this.sweptAt = this.timers.now();
  }

  /**
   * The outcomes of a request's limit calls decided from slices, every one of
   * them allowed; or undefined: ask the store. A request is decided locally
   * only when every limit of it has slices and every slice holds its cost
   * (all or nothing, as in the store); each call is counted towards taking a
   * slice either way. A slice's `remaining` is what the slice has left.
   */
  decide(calls: readonly LimitCall[]): LimitOutcome[] | undefined {
    if (this.closed || calls.length === 0) return undefined;
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!;
      if (call.limit.slices === undefined || call.checkOnly || call.lease !== undefined) return undefined;
    }
    const now = this.timers.now();
    this.sweep(now);
    const states = new Array<KeyState>(calls.length);
    let local = true;
    for (let i = 0; i < calls.length; i++) {
      const state = this.count(calls[i]!, now);
      states[i] = state;
      if (this.liveUnits(state, now) < calls[i]!.cost) local = false;
    }
    if (local) {
      const outcomes = new Array<LimitOutcome>(calls.length);
      for (let i = 0; i < calls.length; i++) {
        const state = states[i]!;
        this.counters.unitsGrantedLocally += calls[i]!.cost;
        const remaining = grantUnits(state, calls[i]!.cost);
        outcomes[i] = { allowed: true, retryAfterMs: 0, remaining, resetAfterMs: 0 };
        const slice = state.slice;
        if (slice !== undefined && state.tail === undefined && slice.left <= slice.taken * TAKE_NEXT_AT) this.takeNext(state);
      }
      return outcomes;
    }
    // To the store. A slice too small for this cost, or past its time, is done: its
    // unused units go back (with a new take when the key is still hot).
    for (let i = 0; i < calls.length; i++) {
      const state = states[i]!;
      const slice = state.slice;
      if (slice !== undefined && (now >= slice.expiresAt || this.liveUnits(state, now) < calls[i]!.cost)) this.renew(state);
      else if (slice === undefined && now >= state.quietUntil && this.hot(state)) this.renew(state);
    }
    return undefined;
  }

  /** Gives back every slice's unused units; decides nothing locally after. */
  async close(): Promise<void> {
    this.closed = true;
    for (const state of this.states.values()) {
      if (state.tail !== undefined) this.dropTail(state);
      if (state.slice !== undefined && !state.busy) this.renew(state);
    }
    await this.idle();
  }

  /** Resolves once no take or give-back is on its way. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Whether a take or give-back is on its way to the store. */
  calling(): boolean {
    return this.inFlight.size > 0;
  }

  /**
   * The takes on their way for a request's limits (settled, never rejected, once
   * their slices are in place), or undefined when none is: a request its slices
   * could not pay for may wait for them, then ask `decide` again.
   */
  taking(calls: readonly LimitCall[]): Promise<unknown> | undefined {
    const pending: Promise<void>[] = [];
    for (const call of calls) {
      const taking = this.states.get(call.identityKey)?.taking;
      if (taking !== undefined) pending.push(taking);
    }
    return pending.length === 0 ? undefined : pending.length === 1 ? pending[0] : Promise.all(pending);
  }

  /** Units left unused in the live slices of one limit and identity (its state key), for tests and measurements. */
  unitsHeld(identityKey: string): number {
    const state = this.states.get(identityKey);
    return state === undefined ? 0 : unitsLeft(state, this.timers.now());
  }

  /** Slices held now, for tests and the holder's gauge. */
  held(): number {
    let n = 0;
    for (const state of this.states.values()) if (state.slice !== undefined) n++;
    return n;
  }

  /** The units the key holds now; a tail that is done lapses here. */
  private liveUnits(state: KeyState, now: number): number {
    const tail = state.tail;
    if (tail !== undefined && (now >= tail.expiresAt || tail.left <= 0)) this.dropTail(state);
    return unitsLeft(state, now);
  }

  private count(call: LimitCall, now: number): KeyState {
    let state = this.states.get(call.identityKey);
    if (state === undefined) {
      state = newKeyState(call, now);
      this.states.set(call.identityKey, state);
    }
    countDecision(state, call, now);
    return state;
  }

  private hot(state: KeyState): boolean {
    return !this.closed && isHot(state, this.timers.now(), this.threshold);
  }

  private dropTail(state: KeyState): void {
    this.counters.unitsLapsed += state.tail!.left;
    state.tail = undefined;
  }

  /**
   * Ends the key's slice (it grants nothing more) and sends its unused units
   * back: with a new take while the key is hot, else alone. One call per key at a time.
   */
  private renew(state: KeyState): void {
    if (state.busy) return;
    if (state.tail !== undefined) this.dropTail(state);
    const slice = state.slice;
    state.slice = undefined;
    const giveBack = slice === undefined ? 0 : slice.left;
    if (slice !== undefined) this.timers.clearTimeout(slice.timer);
    const op: SliceOp = this.hot(state) ? 'take' : 'give-back';
    if (op === 'give-back' && slice === undefined) return;
    state.busy = true;
    const sentAt = this.timers.now();
    const call = state.call;
    const done = this.source.slice(call, op, giveBack).then(
      (answer) => {
        state.busy = false;
        this.counters.unitsReturned += answer.returned;
        this.counters.unitsLapsed += giveBack - answer.returned;
        // From when it was asked for: the store took it later, so it ends here no later than there.
        if (answer.taken > 0) this.install(state, answer.taken, sentAt + answer.validMs);
      },
      (error: unknown) => {
        state.busy = false;
        // The store could not be asked: no new take for a slice's ttl (decisions go to the store meanwhile).
        state.quietUntil = this.timers.now() + call.limit.slices!.ttlMs;
        this.counters.unitsLapsed += giveBack;
        this.options.onError?.(error);
      },
    );
    this.track(state, done, op === 'take');
  }

  /**
   * Takes the key's next slice while its current one still grants, giving
   * nothing back: the current one becomes the tail once the answer is in
   * (its record in the store is replaced by the new slice's).
   */
  private takeNext(state: KeyState): void {
    if (state.busy || this.closed || !this.hot(state)) return;
    state.busy = true;
    const sentAt = this.timers.now();
    const call = state.call;
    const done = this.source.slice(call, 'take', 0).then(
      (answer) => {
        state.busy = false;
        const current = state.slice;
        if (current !== undefined) {
          this.timers.clearTimeout(current.timer);
          state.slice = undefined;
          if (state.tail !== undefined) this.dropTail(state);
          state.tail = current;
        }
        if (answer.taken > 0) this.install(state, answer.taken, sentAt + answer.validMs);
      },
      (error: unknown) => {
        // The current slice keeps granting and goes back at its end as usual.
        state.busy = false;
        state.quietUntil = this.timers.now() + call.limit.slices!.ttlMs;
        this.options.onError?.(error);
      },
    );
    this.track(state, done, true);
  }

  /** A slice the store gave: the key's current one until it runs dry or `expiresAt`. */
  private install(state: KeyState, taken: number, expiresAt: number): void {
    this.counters.slicesTaken++;
    this.counters.unitsTaken += taken;
    const next: Slice = { taken, left: taken, expiresAt, timer: undefined };
    state.slice = next;
    if (this.closed) this.renew(state);
    else next.timer = this.timers.setTimeout(() => this.expire(state, next), Math.max(0, expiresAt - this.timers.now()));
  }

  private track(state: KeyState, done: Promise<void>, take: boolean): void {
    const tracked = done.finally(() => {
      this.inFlight.delete(tracked);
      if (state.taking === tracked) state.taking = undefined;
    });
    this.inFlight.add(tracked);
    if (take) state.taking = tracked;
  }

  private expire(state: KeyState, slice: Slice): void {
    if (state.slice === slice) this.renew(state);
  }

  /** Drops the counts of keys not seen for two ttls and holding nothing, once per second. */
  private sweep(now: number): void {
    if (now - this.sweptAt < 1_000) return;
    this.sweptAt = now;
    for (const [key, state] of this.states) {
      if (state.slice === undefined && !state.busy && now - state.windowStart >= 2 * state.call.limit.slices!.ttlMs) {
        if (state.tail !== undefined) this.dropTail(state);
        this.states.delete(key);
      }
    }
  }
}
