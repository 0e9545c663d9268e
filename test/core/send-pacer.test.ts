import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PACING, type Pacing, SendPacer } from '@quota-service/core';

/**
 * When a batcher's queue goes, and in how many batches. The batcher here
 * queues call names, sends its whole queue in the parts the pacer asks for,
 * and answers a batch when the test says. Turns are real (process.nextTick,
 * setImmediate); only the hold timer is faked.
 */
const endOfTurn = () => new Promise<void>((resolve) => process.nextTick(resolve));
const nextIoTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

class Batcher {
  queue: string[] = [];
  /** Each batch sent, and the function that answers it. */
  readonly sent: Array<{ calls: string[]; answer: () => void }> = [];
  readonly pacer: SendPacer;

  constructor(pacing: Pacing = PACING) {
    this.pacer = new SendPacer(
      () => this.queue.length,
      (parts) => this.flush(parts),
      pacing,
    );
  }

  call(...names: string[]): void {
    for (const name of names) {
      this.queue.push(name);
      this.pacer.schedule();
    }
  }

  batches(): string[][] {
    return this.sent.map((s) => s.calls);
  }

  private flush(parts: number): void {
    this.pacer.flushing();
    const calls = this.queue;
    this.queue = [];
    const size = Math.ceil(calls.length / parts);
    for (let start = 0; start < calls.length; start += size) this.sent.push({ calls: calls.slice(start, start + size), answer: this.pacer.sent() });
  }
}

describe('send pacer', () => {
  let batcher: Batcher;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    batcher = new Batcher();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a call alone goes at the end of its turn; the calls of one turn go together', async () => {
    batcher.call('a');
    expect(batcher.batches()).toEqual([]);
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a']]);
    batcher.sent[0]!.answer();
    batcher.call('b', 'c', 'd');
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it("a turn's calls of twice the burst or more, with nothing in flight, go as two batches", async () => {
    batcher.call('a', 'b', 'c', 'd', 'e');
    await endOfTurn();
    expect(batcher.batches()).toEqual([
      ['a', 'b', 'c'],
      ['d', 'e'],
    ]);
  });

  it('without split, they go as one', async () => {
    batcher = new Batcher({ ...PACING, split: false });
    batcher.call('a', 'b', 'c', 'd', 'e');
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a', 'b', 'c', 'd', 'e']]);
  });

  it('behind a batch in flight, calls made alone wait, and go together when it answers', async () => {
    batcher.call('a');
    await endOfTurn();
    for (const name of ['b', 'c', 'd']) {
      await nextIoTurn();
      batcher.call(name);
    }
    await nextIoTurn();
    expect(batcher.batches()).toEqual([['a']]);
    batcher.sent[0]!.answer();
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('behind a batch in flight, the calls of one turn go as a second batch; behind two, they wait', async () => {
    batcher.call('a');
    await endOfTurn();
    await nextIoTurn();
    batcher.call('b', 'c');
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a'], ['b', 'c']]);

    await nextIoTurn();
    batcher.call('d', 'e', 'f');
    await nextIoTurn();
    expect(batcher.batches()).toHaveLength(2);
    batcher.sent[1]!.answer();
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a'], ['b', 'c'], ['d', 'e', 'f']]);
  });

  it('calls held back earlier do not count toward a later turn’s burst', async () => {
    batcher.call('a');
    await endOfTurn();
    await nextIoTurn();
    batcher.call('b');
    await nextIoTurn();
    batcher.call('c');
    await nextIoTurn();
    expect(batcher.batches()).toEqual([['a']]);
    batcher.call('d', 'e');
    await endOfTurn();
    expect(batcher.batches()).toEqual([['a'], ['b', 'c', 'd', 'e']]);
  });

  it('calls held behind a batch that does not answer go after the hold', async () => {
    batcher.call('a');
    await endOfTurn();
    await nextIoTurn();
    batcher.call('b');
    await nextIoTurn();
    vi.advanceTimersByTime(PACING.holdMs - 1);
    expect(batcher.batches()).toEqual([['a']]);
    vi.advanceTimersByTime(1);
    expect(batcher.batches()).toEqual([['a'], ['b']]);
  });

  it('a batch counts as answered once, however often its function is called', async () => {
    batcher.call('a', 'b');
    await endOfTurn();
    await nextIoTurn();
    batcher.call('c', 'd');
    await endOfTurn();
    expect(batcher.batches()).toHaveLength(2);
    batcher.sent[0]!.answer();
    batcher.sent[0]!.answer();
    await nextIoTurn();
    batcher.call('e', 'f');
    await endOfTurn();
    await nextIoTurn();
    batcher.call('g', 'h');
    await nextIoTurn();
    // c's batch and e's are in flight: g and h wait.
    expect(batcher.batches()).toEqual([
      ['a', 'b'],
      ['c', 'd'],
      ['e', 'f'],
    ]);
  });
});
