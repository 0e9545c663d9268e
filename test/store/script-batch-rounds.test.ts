import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ScriptCall } from '../../src/store/redis/script/decide-script.js';
import { ROUND_PACING, ScriptBatcher } from '../../src/store/redis/script-batcher.js';

/**
 * When the script batcher sends: a call that finds no round in flight goes at
 * the end of the current turn (before any I/O or timer); behind a round in
 * flight, the calls one turn queues together go as a second round, and calls
 * that come alone ride the next, which goes when a round answers, or the hold
 * later at the latest. What Redis makes of the rounds is
 * script-batch.test.ts's; here the sender only records what it is given and
 * answers when the test says.
 */
interface Sent {
  call: ScriptCall;
  binary: boolean;
  weight: number;
  answer(reply: unknown): void;
  fail(error: Error): void;
}

/** A driver call of one limit (ARGV[3]: the number of limits). */
const call = (key: string): ScriptCall => ({ keys: [key], args: ['spend', '', '1'] });
const NOW = 1_700_000_000_000;
/** A batch reply of one call (decide-batch.ts): its group's now, then an allowed decision of one limit. */
function oneDecision(remaining: number): Buffer {
  const reply = Buffer.alloc(8 + 1 + 1 + 4 * 8);
  reply.writeDoubleLE(NOW, 0);
  reply[8] = 1;
  reply[9] = 1;
  reply.writeDoubleLE(remaining, 18);
  return reply;
}
/** That decision as the call alone gets it: all_allowed, the limit's five fields, now. */
const decided = (remaining: number) => [1, 1, 0, remaining, 0, 0, NOW];
const endOfTurn = () => new Promise<void>((resolve) => process.nextTick(resolve));
const nextIoTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('script batcher rounds', () => {
  let sent: Sent[];
  let batcher: ScriptBatcher;
  const weights = () => sent.map((s) => s.weight);

  beforeEach(() => {
    // Only the hold timer is faked: it fires when a test moves the clock.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    sent = [];
    batcher = new ScriptBatcher(
      (sentCall, binary, weight) => new Promise((resolve, reject) => sent.push({ call: sentCall, binary, weight, answer: resolve, fail: reject })),
      (error) => error,
    );
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a call alone goes at the end of its turn, before the next I/O turn, as a batch of one', async () => {
    const answer = batcher.run(call('a'));
    await endOfTurn();
    expect(weights()).toEqual([1]);
    expect(sent[0]!.binary).toBe(true);
    expect(sent[0]!.call).toMatchObject({ keys: ['a'], args: ['batch', '1', '1', '1', '3', 'spend', '', '1'] });
    sent[0]!.answer(oneDecision(7));
    expect(await answer).toEqual(decided(7));
  });

  it('the calls of one turn go together', async () => {
    const answers = [batcher.run(call('a')), batcher.run(call('b')), batcher.run(call('c'))].map((p) => p.catch((e: Error) => e.message));
    await endOfTurn();
    expect(weights()).toEqual([3]);
    sent[0]!.fail(new Error('down'));
    expect(await Promise.all(answers)).toEqual(['down', 'down', 'down']);
  });

  it('calls of later turns wait while a round is unanswered, and go together when it answers', async () => {
    const first = batcher.run(call('a'));
    await endOfTurn();
    const later: Array<Promise<unknown>> = [];
    for (const key of ['b', 'c', 'd']) {
      await nextIoTurn();
      later.push(batcher.run(call(key)).catch((e: Error) => e.message));
    }
    await nextIoTurn();
    expect(weights()).toEqual([1]);

    sent[0]!.answer(oneDecision(7));
    expect(await first).toEqual(decided(7));
    await endOfTurn();
    expect(weights()).toEqual([1, 3]);
    sent[1]!.fail(new Error('down'));
    expect(await Promise.all(later)).toEqual(['down', 'down', 'down']);
  });

  it('behind a round in flight, the calls one turn queues together go as a second round, never split', async () => {
    void batcher.run(call('a'));
    await endOfTurn();
    await nextIoTurn();
    void batcher.runEach([call('b'), call('c'), call('d'), call('e')]);
    await endOfTurn();
    expect(weights()).toEqual([1, 4]);
    sent[0]!.answer(oneDecision(7));
    sent[1]!.answer(null);
    await nextIoTurn();
    void batcher.runEach([call('f'), call('g'), call('h'), call('i')]);
    await endOfTurn();
    expect(weights()).toEqual([1, 4, 4]);
  });

  it('a round that does not answer holds the calls behind it the hold at the most', async () => {
    void batcher.run(call('a'));
    await endOfTurn();
    await nextIoTurn();
    const held = batcher.run(call('b'));
    await nextIoTurn();
    vi.advanceTimersByTime(ROUND_PACING.holdMs - 1);
    expect(weights()).toEqual([1]);
    vi.advanceTimersByTime(1);
    expect(weights()).toEqual([1, 1]);
    sent[1]!.answer(oneDecision(6));
    expect(await held).toEqual(decided(6));
  });
});
