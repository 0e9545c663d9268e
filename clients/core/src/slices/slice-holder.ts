import type { LimitOutcome } from '../algorithms/outcome.js';
import type { LimitCall } from '../types.js';
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

const systemTimers: SliceTimers = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    timer.unref?.();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

interface Slice {
  /** Units left to grant. */
  left: number;
  /** Local time after which it grants nothing. */
  expiresAt: number;
  timer: unknown;
}

interface KeyState {
  call: LimitCall;
  /** Decisions seen in the current count window, which starts at windowStart and lasts the limit's ttl_ms. */
  seen: number;
  /** Decisions seen in the window before it. */
  seenBefore: number;
  windowStart: number;
  slice?: Slice;
  /** A take or give-back of this key is on its way: no second one. */
  busy: boolean;
  /** After a failed take, no new one before this local time (a slice's ttl later). */
  quietUntil: number;
}

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
    const states = calls.map((call) => this.count(call, now));
    let local = true;
    for (let i = 0; i < calls.length; i++) {
      const slice = states[i]!.slice;
      if (slice === undefined || now >= slice.expiresAt || slice.left < calls[i]!.cost) local = false;
    }
    if (local) {
      const outcomes = new Array<LimitOutcome>(calls.length);
      for (let i = 0; i < calls.length; i++) {
        const slice = states[i]!.slice!;
        slice.left -= calls[i]!.cost;
        this.counters.unitsGrantedLocally += calls[i]!.cost;
        outcomes[i] = { allowed: true, retryAfterMs: 0, remaining: slice.left, resetAfterMs: 0 };
      }
      return outcomes;
    }
    // To the store. A slice too small for this cost, or past its time, is done: its
    // unused units go back (with a new take when the key is still hot).
    for (let i = 0; i < calls.length; i++) {
      const state = states[i]!;
      const slice = state.slice;
      if (slice !== undefined && (now >= slice.expiresAt || slice.left < calls[i]!.cost)) this.renew(state);
      else if (slice === undefined && now >= state.quietUntil && this.hot(state)) this.renew(state);
    }
    return undefined;
  }

  /** Gives back every slice's unused units; decides nothing locally after. */
  async close(): Promise<void> {
    this.closed = true;
    for (const state of this.states.values()) if (state.slice !== undefined && !state.busy) this.renew(state);
    await this.idle();
  }

  /** Resolves once no take or give-back is on its way. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Units left unused in the live slices of one limit and identity (its state key), for tests and measurements. */
  unitsHeld(identityKey: string): number {
    const slice = this.states.get(identityKey)?.slice;
    return slice === undefined || this.timers.now() >= slice.expiresAt ? 0 : slice.left;
  }

  /** Slices held now, for tests and the holder's gauge. */
  held(): number {
    let n = 0;
    for (const state of this.states.values()) if (state.slice !== undefined) n++;
    return n;
  }

  private count(call: LimitCall, now: number): KeyState {
    const key = call.identityKey;
    let state = this.states.get(key);
    if (state === undefined) {
      state = { call, seen: 0, seenBefore: 0, windowStart: now, busy: false, quietUntil: Number.NEGATIVE_INFINITY };
      this.states.set(key, state);
    }
    state.call = call;
    const ttl = call.limit.slices!.ttlMs;
    if (now - state.windowStart >= ttl) {
      state.seenBefore = now - state.windowStart >= 2 * ttl ? 0 : state.seen;
      state.seen = 0;
      state.windowStart = now - ((now - state.windowStart) % ttl);
    }
    state.seen++;
    return state;
  }

  /** More than `threshold` decisions in the count window of now or the one before it. */
  private hot(state: KeyState): boolean {
    if (this.closed) return false;
    const age = this.timers.now() - state.windowStart;
    const ttl = state.call.limit.slices!.ttlMs;
    if (age >= 2 * ttl) return false;
    if (age >= ttl) return state.seen > this.threshold;
    return state.seen > this.threshold || state.seenBefore > this.threshold;
  }

  /**
   * Ends the key's slice (it grants nothing more) and sends its unused units
   * back: with a new take while the key is hot, else alone. One call per key at a time.
   */
  private renew(state: KeyState): void {
    if (state.busy) return;
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
        if (answer.taken <= 0) return;
        this.counters.slicesTaken++;
        this.counters.unitsTaken += answer.taken;
        // From when it was asked for: the store took it later, so it ends here no later than there.
        const expiresAt = sentAt + answer.validMs;
        const next: Slice = { left: answer.taken, expiresAt, timer: undefined };
        state.slice = next;
        if (this.closed) this.renew(state);
        else next.timer = this.timers.setTimeout(() => this.expire(state, next), Math.max(0, expiresAt - this.timers.now()));
      },
      (error: unknown) => {
        state.busy = false;
        // The store could not be asked: no new take for a slice's ttl (decisions go to the store meanwhile).
        state.quietUntil = this.timers.now() + call.limit.slices!.ttlMs;
        this.counters.unitsLapsed += giveBack;
        this.options.onError?.(error);
      },
    );
    const tracked = done.finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  private expire(state: KeyState, slice: Slice): void {
    if (state.slice === slice) this.renew(state);
  }

  /** Drops the counts of keys not seen for two ttls and holding nothing, once per second. */
  private sweep(now: number): void {
    if (now - this.sweptAt < 1_000) return;
    this.sweptAt = now;
    for (const [key, state] of this.states) {
      if (state.slice === undefined && !state.busy && now - state.windowStart >= 2 * state.call.limit.slices!.ttlMs) this.states.delete(key);
    }
  }
}
