import type { DecideMode, DecideOptions, GroupDecision, LimitCall, LimitOutcome, Memo } from '@quota-service/core';
import type { DecideStep } from '../../store.js';

/** One script call: calls whose keys share a slot (or one master's slots), a mode and its options. */
export interface ScriptStep {
  readonly calls: readonly LimitCall[];
  readonly mode: DecideMode;
  readonly options?: DecideOptions;
  /** A settlement decided in this one call: its step, whose record is told as soon as it answers. */
  readonly settle?: Extract<DecideStep, { mode: 'settle' }>;
}

/** How the saga reaches Redis. */
export interface ScriptSteps {
  /** Script steps sent together (one batch per master), answered in their order. */
  run(steps: readonly ScriptStep[]): Promise<Array<GroupDecision | Error>>;
  remember(memo: Memo, value: string): Promise<void>;
  /** Whether one script call there can decide `calls`, whose keys lie in several slots (one master serves them all, as last seen). */
  inOneCall(calls: readonly LimitCall[]): boolean;
  /** A spend decided again (a replay's leases), whatever slots its calls lie in. */
  spend(calls: readonly LimitCall[]): Promise<GroupDecision>;
}

/** Indexes into a step's calls, one list per hash slot, sorted by slot; never mutated once made. */
export type SlotGroups = readonly (readonly number[])[];

/** Adds a script step to the coming phase; `tag` comes back with its answer. */
export type Emit = (step: ScriptStep, tag: number) => void;

/** One step of the store's decide whose calls lie in several slots, as a sequence of single-slot script steps. */
export interface Saga {
  /** No more script steps; `finish` answers. */
  done: boolean;
  /** Not before this time (ms, this process's clock): waiting for another call to store its decision. */
  notBefore: number;
  /** Adds its script steps for the coming phase. */
  next(emit: Emit): void;
  /** The answer to a step it emitted with `tag`. */
  take(tag: number, step: ScriptStep, answer: GroupDecision | Error): void;
  finish(scripts: ScriptSteps): GroupDecision | Error | Promise<GroupDecision | Error>;
}

/** In place of a group: the step's whole decision in one call on one master. */
export const WHOLE = -1;

/** The calls of a group, with another cost when given. */
export function pick(calls: readonly LimitCall[], group: readonly number[], cost?: number): LimitCall[] {
  const picked = new Array<LimitCall>(group.length);
  for (let j = 0; j < group.length; j++) picked[j] = cost === undefined ? calls[group[j]!]! : { ...calls[group[j]!]!, cost };
  return picked;
}

export function place(outcomes: LimitOutcome[], group: readonly number[], got: readonly LimitOutcome[]): void {
  for (let j = 0; j < group.length; j++) outcomes[group[j]!] = got[j]!;
}

export function allAllowed(outcomes: readonly LimitOutcome[]): boolean {
  for (let i = 0; i < outcomes.length; i++) if (!outcomes[i]!.allowed) return false;
  return true;
}
