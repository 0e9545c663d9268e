// What reading one batch reply of 100 token bucket decisions costs the service
// (docs/benchmarks.md): ioredis 6's RESP decoder fed the reply's
// bytes directly, in a loop, for
//   binary  the reply decide.lua sends now: one bulk string, taken from a real
//           batch run on a real Redis, then splitBatchReply reading it;
//   array   the same decisions as the flat array of numbers and `%.17g` texts
//           the script sent before (601 elements), decoded to strings as a
//           string-mode command is.
//
//   npx tsx bench/resp-decode.ts [--decodes 20000] [--rounds 3]
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { stringify } from 'yaml';
import { batchArguments, splitBatchReply } from '../src/store/redis/script/decide-batch.js';
import { decideArguments, decideLua } from '../src/store/redis/script/decide-script.js';
import { identityKey, parsePolicies } from '@quota-service/core';
import { startRedisServer } from '../test/support/redis-server.js';
import { benchMain, type BenchRun } from './bench-main.js';
import { median } from './stats.js';

// ioredis's decoder and reply conversion are internal modules: the bench feeds them bytes as a connection would.
const require = createRequire(import.meta.url);
const { Decoder, RESP_TYPES } = require('ioredis/built/resp/decoder') as {
  Decoder: new (config: object) => { write(chunk: Buffer): void };
  RESP_TYPES: Record<string, number>;
};
const { convertBufferToString } = require('ioredis/built/utils') as { convertBufferToString: (value: unknown) => unknown };

const DECISIONS = 100;

async function main(run: BenchRun): Promise<number> {
  const { values } = parseArgs({ options: { decodes: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' } } });
  const decodes = Number(values.decodes);
  const rounds = Number(values.rounds);
  run.watchdog(120_000);

  const redis = await startRedisServer();
  run.onCleanup(() => redis.stop());
  const client = redis.client();
  run.onCleanup(() => void client.disconnect());

  // A real batch: 100 users, each with some tokens spent, so remaining varies.
  const limit = parsePolicies(
    stringify({ policies: { bench: { limits: [{ name: 'bench', key_by: 'user', algorithm: 'token_bucket', capacity: 1000, refill_per_second: 7 }] } } }),
  ).get('bench')?.limits[0];
  if (limit === undefined) throw new Error('no bench limit');
  const calls = Array.from({ length: DECISIONS }, (_, i) =>
    decideArguments([{ limit, identityKey: identityKey('bench', 'user', String(i)), cost: 1 + (i % 5) }], 'spend'),
  );
  const batch = batchArguments(calls);
  const binary = (await client.callBuffer('EVAL', decideLua, batch.keys.length, ...batch.keys, ...batch.args)) as Buffer;
  const split = splitBatchReply(binary, batch);
  if (split instanceof Error) throw split;

  // The same decisions in the array shape: per group its now, then per call six elements.
  const decisions = split as unknown[][];
  const elements: (number | string)[] = [decisions[0]!.at(-1) as number];
  for (const one of decisions) elements.push(one[0] as number, one[1] as number, one[2] as number, String(one[3]), one[4] as number, one[5] as number);
  const array = Buffer.from(
    `*${elements.length}\r\n${elements.map((e) => (typeof e === 'number' ? `:${e}\r\n` : `$${Buffer.byteLength(e)}\r\n${e}\r\n`)).join('')}`,
  );
  const bulk = Buffer.concat([Buffer.from(`$${binary.length}\r\n`), binary, Buffer.from('\r\n')]);

  // As ioredis 6 configures it for RESP2 (DataHandler's legacy type mapping).
  const mapping = {
    [RESP_TYPES.SIMPLE_STRING!]: Buffer,
    [RESP_TYPES.BLOB_STRING!]: Buffer,
    [RESP_TYPES.VERBATIM_STRING!]: Buffer,
    [RESP_TYPES.BIG_NUMBER!]: String,
    [RESP_TYPES.DOUBLE!]: Buffer,
    [RESP_TYPES.BOOLEAN!]: Number,
    [RESP_TYPES.MAP!]: Array,
    [RESP_TYPES.SET!]: Array,
  };
  let last: unknown;
  const decoder = new Decoder({ getTypeMapping: () => mapping, onReply: (reply: unknown) => (last = reply), onErrorReply: () => {}, onPush: () => {} });
  const kinds = {
    array: () => {
      decoder.write(array);
      convertBufferToString(last);
    },
    binary: () => {
      decoder.write(bulk);
      if (splitBatchReply(last, batch) instanceof Error) throw new Error('binary reply did not split');
    },
  };
  const perReply: Record<string, number[]> = { array: [], binary: [] };
  for (let round = 0; round <= rounds; round++) {
    for (const [name, decode] of Object.entries(kinds)) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < decodes; i++) decode();
      const us = Number(process.hrtime.bigint() - start) / decodes / 1000;
      if (round > 0) perReply[name]!.push(us); // round 0 warms up
    }
  }
  console.log(`one batch reply of ${DECISIONS} token bucket decisions, ${rounds} rounds x ${decodes} decodes (medians)`);
  console.log('| reply | bytes | µs per reply | µs per decision |');
  console.log('|---|--:|--:|--:|');
  for (const [name, bytes] of [
    ['array', array.length],
    ['binary', bulk.length],
  ] as const) {
    const us = median(perReply[name]!);
    console.log(`| ${name} | ${bytes} | ${us.toFixed(2)} | ${(us / DECISIONS).toFixed(3)} |`);
  }
  console.log(`ratio array/binary: ${(median(perReply.array!) / median(perReply.binary!)).toFixed(0)}x`);
  return 0;
}

benchMain(main);
