import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { batchArguments, splitBatchReply, type BatchCall } from '../../src/store/redis/script/decide-batch.js';
import { decideArguments, decideLua, rememberArguments, type ScriptCall } from '../../src/store/redis/script/decide-script.js';
import { identityKey, requestKey } from '@quota-service/core';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { useRedisServer } from '../support/use-redis.js';
import { parseDecideReply } from '../../src/store/redis/script/decide-reply.js';

/**
 * The driver's batch mode read back (src/store/redis/script/decide-batch.ts): a batch
 * reply is one binary string with each group's `now` once, and
 * splitBatchReply gives every call the reply it would have had alone (its
 * remaining as the exact number instead of text). Checked against the real
 * script, including groups deciding at different times, and against
 * malformed replies, which must fail the batch, never read as decisions.
 */
const bucket = limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
const window = limitFrom({ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' });
const one = (user: string, now: number): ScriptCall =>
  decideArguments([{ limit: bucket, identityKey: identityKey('bucket', 'user', user), cost: 1 }], 'spend', now);
const two = (user: string, now: number): ScriptCall =>
  decideArguments(
    [bucket, window].map((limit) => ({ limit, identityKey: identityKey(limit.name, 'user', user), cost: 1 })),
    'spend',
    now,
  );
const memo = { key: requestKey('orders', 'user', 'm', 'user=m', 'r1'), ttlMs: 60_000, count: 1 };

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
  /**
   * An error as its code (Redis adds where in the script only to an error that
   * ends the script call); a decision as the store reads it, so a remaining
   * sent as text and one sent as a number compare by value.
   */
  const plain = (reply: unknown) => {
    if (reply instanceof Error) return { error: reply.message.split(' ')[0], name: reply.name };
    if (Array.isArray(reply) && typeof reply[0] === 'number') return parseDecideReply(reply, (reply.length - 2) / 5);
    return reply;
  };

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
      one('a', T0),
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
      { calls: 4, limits: 1 },
      { calls: 1, limits: 2 },
      { calls: 1, limits: 0 },
      { calls: 1, limits: 1 },
      { calls: 2, limits: 1 },
    ]);
    const reply = await together.callBuffer('EVAL', decideLua, batch.keys.length, ...batch.keys, ...batch.args);
    const split = splitBatchReply(reply, batch);
    const expected = await alone(calls);
    // The reply as a lone call has it: ends with the call's own now.
    expect((split as unknown[]).map(plain)).toEqual(expected);
    expect((split as unknown[][])[4]?.at(-1)).toBe(T0 + 1_500);
    // 7 tokens left at T0, 1.5 refilled, 1 spent: a fraction, exact.
    expect((split as unknown[][])[4]?.[3]).toBe(7.5);
    expect((split as unknown[])[6]).toEqual(['replay', '1', '1', '0', '9', '1000', '0', '123']);
    expect((split as Error[])[7]?.message).toMatch(/^WRONGTYPE/);
    expect((split as unknown[][])[8]?.at(-1)).toBe(T0 + 3_000);
  });

  it('a batch of one (how a lone call goes on one node): each kind of call answers as it does alone', async () => {
    await setUp();
    const calls = [
      one('a', T0),
      two('a', T0 + 1_500),
      rememberArguments(memo, '1 1 0 9 1000 0 123'),
      decideArguments([{ limit: bucket, identityKey: identityKey('bucket', 'user', 'm'), cost: 1 }], 'spend', T0 + 7, { memo }),
      one('bad', T0 + 3_000),
    ];
    const replies: unknown[] = [];
    for (const call of calls) {
      const batch = batchArguments([call]);
      expect(batch).toEqual({
        keys: call.keys,
        args: ['batch', '1', '1', String(call.keys.length), String(call.args.length), ...call.args],
        groups: [{ calls: 1, limits: Number(call.args[2]) }],
      });
      const reply = await together.callBuffer('EVAL', decideLua, batch.keys.length, ...batch.keys, ...batch.args);
      const split = splitBatchReply(reply, batch) as unknown[];
      expect(split).toHaveLength(1);
      replies.push(split[0]);
    }
    expect(replies.map(plain)).toEqual(await alone(calls));
  });
});

/** Records of a batch reply as decide.lua packs them (little-endian). */
const double = (x: number) => {
  const bytes = Buffer.alloc(8);
  bytes.writeDoubleLE(x);
  return bytes;
};
const decision = (all: number, ...limits: [number, number, number, number, number][]) =>
  Buffer.concat([Buffer.of(all), ...limits.map(([allowed, ...rest]) => Buffer.concat([Buffer.of(allowed), ...rest.map(double)]))]);
const text = (kind: number, value: string) => {
  const head = Buffer.alloc(5);
  head.writeUInt8(kind);
  head.writeUInt32LE(Buffer.byteLength(value), 1);
  return Buffer.concat([head, Buffer.from(value)]);
};

describe('a malformed batch reply fails the whole batch with an error saying what is wrong', () => {
  const batch: BatchCall = { keys: [], args: [], groups: [{ calls: 2, limits: 1 }] };
  const allowed = decision(1, [1, 0, 9, 1_000, 0]);
  const cases: [string, unknown, RegExp][] = [
    ['not a binary string', 'OK', /not a binary string, got "OK"/],
    ['an array of the old shape', [T0, 1, 1, 0, '9', 1_000, 0], /not a binary string/],
    ['an empty reply', Buffer.alloc(0), /the now of group 1 at byte 0 is cut short, got 0 bytes$/],
    // The now's 8 bytes are taken from the first decision; the second is then cut short.
    ['no now first', Buffer.concat([allowed, allowed]), /a decision of 1 limits at byte 42 is cut short/],
    ['a decision cut short', Buffer.concat([double(T0), allowed, allowed.subarray(0, 20)]), /a decision of 1 limits at byte 42 is cut short/],
    ['bytes left over', Buffer.concat([double(T0), allowed, allowed, Buffer.of(0)]), /1 bytes left over/],
    ['an unknown record kind', Buffer.concat([double(T0), allowed, Buffer.of(7)]), /byte 42 is no record kind \(7\)/],
    ['a record missing', Buffer.concat([double(T0), allowed]), /byte 42 is no record kind \(the reply ends\)/],
    [
      'a text that is no reply',
      Buffer.concat([double(T0), allowed, text(2, 'garbage')]),
      /the text at byte 42 is neither 'remembered', a replay nor a settlement/,
    ],
    ['a text longer than the reply', Buffer.concat([double(T0), allowed, text(2, 'remembered').subarray(0, 9)]), /a text of 10 bytes at byte 42 is cut short/],
    ['a text length cut short', Buffer.concat([double(T0), allowed, Buffer.of(3, 1)]), /the length of a text at byte 42 is cut short/],
  ];
  it.each(cases)('%s', (_name, reply, why) => {
    const split = splitBatchReply(reply, batch);
    expect(split).toBeInstanceOf(Error);
    expect((split as Error).message).toMatch(/^batch: expected the replies of 2 calls, /);
    expect((split as Error).message).toMatch(why);
  });

  it('well-formed ones for comparison: integers as Redis makes them, remaining exact, an error as a ReplyError', () => {
    const fraction = decision(0, [0, 1_499.9, 0.25, 60_000.7, 0]);
    expect(splitBatchReply(Buffer.concat([double(T0), allowed, fraction]), batch)).toEqual([
      [1, 1, 0, 9, 1_000, 0, T0],
      [0, 0, 1_499, 0.25, 60_000, 0, T0],
    ]);
    const [replay, error] = splitBatchReply(
      Buffer.concat([double(T0), text(2, 'replay 1 1 0 9 1000 0 123'), text(3, 'WRONGTYPE Operation\r\non a key\n')]),
      batch,
    ) as [unknown, Error];
    expect(replay).toEqual(['replay', '1', '1', '0', '9', '1000', '0', '123']);
    expect(error.name).toBe('ReplyError');
    expect(error.message).toBe('WRONGTYPE Operation  on a key');
  });
});
