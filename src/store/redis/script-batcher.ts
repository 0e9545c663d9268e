import { type BatchCall, batchArguments, NotRunHere, splitBatchReply } from './script/decide-batch.js';
import type { ScriptCall } from './script/decide-script.js';
import { SlotsApart } from './store-errors.js';
import { asError, PACING, type Pacing, SendPacer } from '@quota-service/core';

/**
 * Sends one driver call to Redis and answers its reply, or rejects with the
 * error the caller should see (RedisStore maps a transient one to
 * StoreUnavailableError, keeps a script error as it is). A batch's reply is
 * one binary string, so `binary` asks for its bulk strings as Buffers;
 * `weight` is the number of calls it carries. `node` (a Redis Cluster): the
 * master a batch goes to, whose keys it carries in ARGV (a node batch); a
 * lone call goes by its keys' slot, following redirections.
 */
export type ScriptSender = (call: ScriptCall, binary: boolean, weight: number, node?: string) => Promise<unknown>;

/**
 * Where the calls of a Redis Cluster go: each turn's calls become one batch
 * per master, and a call that did not run where it was sent goes again alone.
 */
export interface BatchRoutes {
  /** The master serving the call's slot as last seen (host:port); undefined when none is known. */
  nodeOf(call: ScriptCall): string | undefined;
  /**
   * Sends a call alone by a path that follows MOVED and ASK: for a call a node
   * did not run (NotRunHere), or every call of a batch that never ran (BatchNotRun).
   */
  resend(call: ScriptCall): Promise<unknown>;
}

/**
 * A node batch that certainly did not run: the node refused it before its
 * script started (READONLY from a master just demoted, say), or there was no
 * connection to send it on. Its calls go again, each alone (BatchRoutes.resend).
 */
export class BatchNotRun extends Error {
  override name = 'BatchNotRun';
}

/**
 * How many calls and keys one batched script call may carry: Redis serves
 * nothing else while a script runs, so a script stays short (about 100 token
 * bucket decisions run in well under a millisecond; docs/decide-script.md).
 * With runtime overrides a call of one limit carries three keys (its state,
 * and the overrides' generation and exact-override keys, only read), so 100
 * such calls fit in one script call.
 */
export const BATCH_LIMITS = { calls: 100, keys: 512 };

/**
 * Where a call's outcome goes: `ok` with its reply, or not with its error.
 * `index` is the call's place in a runEach().
 */
type Settle = (ok: boolean, value: unknown, index: number) => void;

interface Waiting {
  call: ScriptCall;
  settle: Settle;
  index: number;
}

/**
 * When rounds go (SendPacer): two at most in flight, a second only for the
 * calls one turn queued together (an AllowBatch's or a stream message's
 * decisions). A round is never split: its callers are answered together, as
 * the messages they came in are.
 */
export const ROUND_PACING: Pacing = { ...PACING, split: false };

/**
 * Coalesces driver calls into script calls in batch mode (decide.lua). A call
 * that finds no round in flight is sent at the end of the current turn's
 * synchronous work and promise reactions (process.nextTick after them, before
 * any I/O or timer), with every call queued by then (so the engine's 100
 * allow calls of one AllowBatch, each a few awaits deep, go together). Behind
 * a round in flight, the calls one turn queued together go as a second round;
 * a call that comes alone waits and goes with the next round, when a round
 * answers or ROUND_PACING.holdMs later at the latest (SendPacer). Alone, a
 * call waits for nothing; under load the rounds grow on their own. On one
 * node a lone call goes in batch mode too (a batch of one): its one binary
 * reply costs Redis and this process less than an ordinary call's reply, an
 * array Redis converts from Lua and ioredis decodes element by element. On a
 * cluster a lone call goes as an ordinary call by its slot, following
 * redirections.
 *
 * Each call keeps its own outcome: the batch reply holds one reply per call,
 * an error in one call's Lua (e.g. WRONGTYPE) rejects only that call with a
 * script error, and an error of the whole script call (connection, LOADING,
 * BUSY, timeout) rejects every call in it, as it would have each separate call.
 *
 * With `routes` (a Redis Cluster) a round's calls become one node batch per
 * master, in the order they came; a call its node did not run (NotRunHere),
 * or every call of a node batch that never ran (BatchNotRun), goes again alone.
 */
export class ScriptBatcher {
  private queue: Waiting[] = [];
  /** When the queue goes; it counts the rounds sent and not yet answered in full. */
  private readonly pacer = new SendPacer(
    () => this.queue.length,
    () => this.flush(),
    ROUND_PACING,
  );

  constructor(
    private readonly send: ScriptSender,
    /** Maps an error reply of one call inside a batch to what its caller sees. */
    private readonly callError: (error: Error) => unknown,
    private readonly limits = BATCH_LIMITS,
    /** A Redis Cluster: one batch per master and turn; absent for one node. */
    private readonly routes?: BatchRoutes,
  ) {}

  run(call: ScriptCall): Promise<unknown> {
    return new Promise((resolve, reject) => this.enqueue(call, (ok, value) => (ok ? resolve(value) : reject(value)), 0));
  }

  /**
   * run() for each call, in order, answered together: per call its reply, or
   * the error run() would reject with (an Error). One promise for them all
   * instead of one per call (an AllowBatch's decisions, src/engine/engine.ts).
   */
  runEach(calls: readonly ScriptCall[]): Promise<Array<unknown>> {
    const answers = new Array<unknown>(calls.length);
    if (calls.length === 0) return Promise.resolve(answers);
    return new Promise((resolve) => {
      let left = calls.length;
      const settle: Settle = (ok, value, index) => {
        answers[index] = ok ? value : asError(value);
        if (--left === 0) resolve(answers);
      };
      for (let index = 0; index < calls.length; index++) this.enqueue(calls[index]!, settle, index);
    });
  }

  private enqueue(call: ScriptCall, settle: Settle, index: number): void {
    this.queue.push({ call, settle, index });
    this.pacer.schedule();
  }

  private flush(): void {
    this.pacer.flushing();
    if (this.queue.length === 0) return;
    const queue = this.queue;
    this.queue = [];
    const round = new Round(this.pacer.sent());
    this.route(queue, round);
    round.answered();
  }

  private route(queue: Waiting[], round: Round): void {
    const routes = this.routes;
    if (routes === undefined) {
      this.split(queue, undefined, round);
      return;
    }
    // One batch per master, its calls in the order they came.
    const byNode = new Map<string | undefined, Waiting[]>();
    for (let i = 0; i < queue.length; i++) {
      const waiting = queue[i]!;
      const node = routes.nodeOf(waiting.call);
      const list = byNode.get(node);
      if (list === undefined) byNode.set(node, [waiting]);
      else list.push(waiting);
    }
    for (const [node, list] of byNode) {
      // No known master: each call alone, routed by its slot (the client finds the node).
      if (node === undefined) for (const waiting of list) this.resend(waiting);
      else this.split(list, node, round);
    }
  }

  /** The calls for one node, in script calls of at most the batch limits. */
  private split(queue: Waiting[], node: string | undefined, round: Round): void {
    let start = 0;
    let keys = 0;
    for (let i = 0; i < queue.length; i++) {
      const size = (queue[i] as Waiting).call.keys.length;
      if (i > start && (i - start === this.limits.calls || keys + size > this.limits.keys)) {
        this.dispatch(queue.slice(start, i), node, round);
        start = i;
        keys = 0;
      }
      keys += size;
    }
    if (start < queue.length) this.dispatch(start === 0 ? queue : queue.slice(start), node, round);
  }

  private dispatch(waiting: Waiting[], node: string | undefined, round: Round): void {
    round.sent();
    // A lone call for a cluster's master goes by its slot; one across slots runs only in a node batch, even alone.
    if (waiting.length === 1 && node !== undefined && waiting[0]!.call.acrossSlots !== true) {
      const [only] = waiting as [Waiting];
      this.send(only.call, false, 1, node).then(
        (reply) => {
          only.settle(true, reply, only.index);
          round.answered();
        },
        (error: unknown) => {
          only.settle(false, error, only.index);
          round.answered();
        },
      );
      return;
    }
    const batch = batchArguments(
      waiting.map((w) => w.call),
      node !== undefined,
    );
    this.send(batch, true, waiting.length, node).then(
      (reply) => {
        this.answerBatch(waiting, batch, reply);
        round.answered();
      },
      (error: unknown) => {
        // Never ran: each call goes again, alone. Anything else may have run, and is never sent again.
        if (error instanceof BatchNotRun) for (const w of waiting) this.resend(w);
        else for (const w of waiting) w.settle(false, error, w.index);
        round.answered();
      },
    );
  }

  private answerBatch(waiting: Waiting[], batch: BatchCall, reply: unknown): void {
    const replies = splitBatchReply(reply, batch);
    if (replies instanceof Error) {
      for (const w of waiting) w.settle(false, replies, w.index);
      return;
    }
    for (let i = 0; i < waiting.length; i++) {
      const w = waiting[i]!;
      const one = replies[i];
      if (one instanceof Error) w.settle(false, this.callError(one), w.index);
      else if (one instanceof NotRunHere) this.resend(w);
      else w.settle(true, one, w.index);
    }
  }

  /**
   * A call that did not run where it was sent: alone, by its slot
   * (BatchRoutes.resend); one across slots cannot go alone, and answers
   * SlotsApart for its caller to decide it slot by slot.
   */
  private resend(waiting: Waiting): void {
    if (waiting.call.acrossSlots === true) {
      waiting.settle(false, new SlotsApart('its slots are not on one master now'), waiting.index);
      return;
    }
    this.routes!.resend(waiting.call).then(
      (reply) => waiting.settle(true, reply, waiting.index),
      (error: unknown) => waiting.settle(false, error, waiting.index),
    );
  }
}

/** One flush's script calls: answered once each of them is, and the flush has sent them all. */
class Round {
  /** The flush itself holds one until it has sent every call. */
  private unanswered = 1;

  constructor(private readonly onAnswered: () => void) {}

  sent(): void {
    this.unanswered++;
  }

  answered(): void {
    if (--this.unanswered === 0) this.onAnswered();
  }
}
