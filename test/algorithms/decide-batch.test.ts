import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { batchArguments, splitBatchReply, type BatchCall } from '../../src/algorithms/decide-batch.js';
import { decideArguments, decideLua, rememberArguments, type ScriptCall } from '../../src/algorithms/decide-script.js';
import { identityKey, requestKey } from '../../src/engine/keys.js';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * The driver's batch mode read back (src/algorithms/decide-batch.ts): a batch
 * reply leaves out each call's length and `now` (sent once per group), and
 * splitBatchReply gives every call the reply it would have had alone. Checked
 * against the real script, including groups deciding at different times, and
 * against malformed replies, which must fail the batch, never read as decisions.
 */
const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
const window = limitFrom({ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' });
const one = (user: string, now: number): ScriptCall => decideArguments([{ limit: bucket, identityKey: identityKey('bucket', 'user', user), cost: 1 }], 'spend', now);
const two = (user: string, now: number): ScriptCall =>
  decideArguments(
    [bucket, window].map((limit) => ({ limit, identityKey: identityKey(limit.name, 'user', user), cost: 1 })),
    'spend',
    now,
  );
const memo = { key: requestKey('orders', 'user', 'm', 'r1'), ttlMs: 60_000, count: 1 };

const server = useRedisServer();

describe('driver batch mode: each call gets the reply it would have had alone', () => {
  let together: Redis;
  beforeAll(() => {
    together = server().client();
  });
  beforeEach(async () => {
    await together.flushall();
  });
  afterAll(() => {
    together.disconnect();
  });

  /** The starting state: a key of the wrong type, which fails the call that reads it. */
  const setUp = () => together.set(identityKey('bucket', 'user', 'bad'), 'not a hash');
  /** An error as its code: Redis adds where in the script only to an error that ends the script call. */
  const plain = (reply: unknown) => (reply instanceof Error ? { error: reply.message.split(' ')[0] } : reply);

  /** The same calls run one by one from the same state, after the batch ran. */
  async function alone(calls: ScriptCall[]): Promise<unknown[]> {
    await together.flushall();
    await setUp();
    const replies: unknown[] = [];
    for (const { keys, args } of calls) replies.push(await together.eval(decideLua, keys.length, ...keys, ...args).catch((error: unknown) => error));
    return replies.map(plain);
  }

  it('groups of one and two limits at different times, a remember, a replay and a failing call', async () => {
    await setUp();
    const calls = [
      one('a', T0),
      one('b', T0),
      two('a', T0 + 1_500),
      rememberArguments(memo, '1 1 0 9 1000 0 123'),
      decideArguments([{ limit: bucket, identityKey: identityKey('bucket', 'user', 'm'), cost: 1 }], 'spend', T0 + 7, { memo }),
      one('bad', T0 + 3_000),
      one('c', T0 + 3_000),
    ];
    const batch = batchArguments(calls);
    expect(batch.groups).toEqual([
      { calls: 2, limits: 1 },
      { calls: 1, limits: 2 },
      { calls: 1, limits: 0 },
      { calls: 1, limits: 1 },
      { calls: 2, limits: 1 },
    ]);
    const reply = await together.eval(decideLua, batch.keys.length, ...batch.keys, ...batch.args);
    const split = splitBatchReply(reply, batch);
    const expected = await alone(calls);
    // The reply as a lone call has it: ends with the call's own now.
    expect((split as unknown[]).map(plain)).toEqual(expected);
    expect((split as unknown[][])[2]?.at(-1)).toBe(T0 + 1_500);
    expect((split as unknown[])[4]).toEqual(['replay', '1', '1', '0', '9', '1000', '0', '123']);
    expect((split as Error[])[5]?.message).toMatch(/^WRONGTYPE/);
    expect((split as unknown[][])[6]?.at(-1)).toBe(T0 + 3_000);
  });
});

describe('a malformed batch reply fails the whole batch with an error saying what is wrong', () => {
  const batch: BatchCall = { keys: [], args: [], groups: [{ calls: 2, limits: 1 }] };
  const decision = [1, 1, 0, '9', 1_000, 0];
  const cases: [string, unknown, RegExp][] = [
    ['not an array', 'OK', /not an array/],
    // all_allowed (1) reads as a now; the elements then run out.
    ['no now first', [...decision, ...decision], /a decision of 1 limits at element 7 is cut short/],
    ['a text where a now belongs', ['123', ...decision, ...decision], /element 0 \(the now of group 1\) is not an integer/],
    ['a decision cut short', [T0, ...decision, 1, 1, 0], /a decision of 1 limits at element 7 is cut short/],
    ['elements left over', [T0, ...decision, ...decision, 0], /1 elements left over/],
    ['a text that is no reply', [T0, ...decision, 'garbage'], /element 7 is neither a decision, a text nor an error/],
    ['an empty element', [T0, ...decision, null], /element 7 is neither/],
  ];
  it.each(cases)('%s', (_name, reply, why) => {
    const split = splitBatchReply(reply, batch);
    expect(split).toBeInstanceOf(Error);
    expect((split as Error).message).toMatch(/^batch: expected the replies of 2 calls, /);
    expect((split as Error).message).toMatch(why);
  });

  it('a well-formed one for comparison', () => {
    expect(splitBatchReply([T0, ...decision, ...decision], batch)).toEqual([
      [...decision, T0],
      [...decision, T0],
    ]);
  });
});
