// `make bench`, many keys (spec verification 5): one Redis, 1M distinct
// identities making one decision each, then Redis memory and key count, then
// the TTLs bringing the count back down.
//
//   npx tsx bench/many-keys.ts [--identities 1000000] [--scripted 20000] [--ttl-seconds 60]
//
// The first --scripted identities go through the production decide script
// (EVALSHA, as RedisStore sends it where Redis refuses its function library, in explicit pipelines). The rest are
// decided inside Redis by a bulk script that runs the same algorithm function
// (the token bucket's .lua, unchanged) in a loop over 10,000 keys per call:
// on a small shared machine a million separate script calls take minutes,
// and what is measured here is the state Redis keeps and expires, not the
// call path. The bench checks that both write the same state (fields and
// MEMORY USAGE of a key of each).
import { createHash } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import type { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { ALGORITHM_TABLES, algorithmLua, decideArguments, decideLua, textLua } from '../src/store/redis/script/decide-script.js';
import { tokenBucket } from '../clients/core/src/algorithms/token-bucket/token-bucket.js';
import { identityKey, type Limit, parsePolicies } from '@quota-service/core';
import { startRedisServer } from '../test/support/redis-server.js';
import { parseDecideReply } from '../src/store/redis/script/decide-reply.js';

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at === -1 ? fallback : Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name}: expected a positive whole number`);
  return value;
}

const IDENTITIES = flag('identities', 1_000_000);
const TTL_SECONDS = flag('ttl-seconds', 60);
const SCRIPTED = Math.min(flag('scripted', 20_000), IDENTITIES);
const PIPELINE = 2_000;
const BULK_CHUNK = 10_000;
/** Pipelines in flight at once: enough to keep Redis busy while the client builds the next. */
const IN_FLIGHT = 4;
const CAPACITY = 10;

/** identityKey('many', 'user', `user-${id}`); "user-<n>" needs no percent-encoding, so the bulk script builds the same key. */
const keyOf = (id: number) => identityKey('many', 'user', `user-${id}`);
const KEY_PREFIX_OF_ID = identityKey('many', 'user', 'user-').slice(0, -1);
const KEY_SUFFIX = '}';

/**
 * The token bucket's own Lua function in a loop: decide (spend 1) for the keys
 * ARGV[1]..n..ARGV[2] for n in [ARGV[3], ARGV[4]), writing as the driver does
 * when the request is allowed. Keys are built inside the script (not declared
 * in KEYS): fine on one standalone Redis, which is all a bench needs.
 * Returns the number of denials (none expected: every identity is new).
 */
const BULK_LUA = [
  // The prologue the decide script has (decide-script.ts): the tables the algorithm files fill, and text.lua's int/g17.
  ALGORITHM_TABLES,
  textLua,
  `do\n${algorithmLua(tokenBucket)}\nend`,
  `local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local args = { ARGV[5], ARGV[6], ARGV[7] }
local denied = 0
for id = tonumber(ARGV[3]), tonumber(ARGV[4]) - 1 do
  local keys = { ARGV[1] .. id .. ARGV[2] }
  local outcome, write = A.token_bucket(keys, args, now)
  -- The driver's call of an algorithm's write (decide.lua).
  if outcome[1] == 1 then write(keys, args, now, outcome) else denied = denied + 1 end
end
return denied`,
].join('\n');

/** The bulk script must leave what the production script leaves: same fields, same TTL rule, same bytes. */
async function sameState(client: Redis, scripted: string, bulk: string): Promise<void> {
  const [a, b] = await Promise.all([client.hgetall(scripted), client.hgetall(bulk)]);
  const [ma, mb] = await Promise.all([client.memory('USAGE', scripted), client.memory('USAGE', bulk)]);
  const [ta, tb] = await Promise.all([client.pttl(scripted), client.pttl(bulk)]);
  const fields = (h: Record<string, string>) => Object.keys(h).sort().join(',');
  if (fields(a) !== 'tokens,ts' || fields(b) !== fields(a) || a.tokens !== b.tokens || ta <= 0 || tb <= 0 || ma !== mb) {
    throw new Error(`bulk state differs from the decide script's: ${JSON.stringify({ a, b, ma, mb, ta, tb })}`);
  }
}

interface Sample {
  atSeconds: number;
  keys: number;
  usedMemory: number;
  rss: number;
}

async function sample(client: Redis, since: number): Promise<Sample> {
  const [keys, memory] = await Promise.all([client.dbsize(), client.info('memory')]);
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(memory)?.[1] ?? Number.NaN);
  return { atSeconds: (performance.now() - since) / 1000, keys, usedMemory: field('used_memory'), rss: field('used_memory_rss') };
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const row = (label: string, s: Sample) => `| ${label} | ${s.atSeconds.toFixed(1)} | ${s.keys} | ${mib(s.usedMemory)} | ${mib(s.rss)} |`;

async function main(): Promise<void> {
  // A token bucket of 10 whose idle key lives TTL_SECONDS (2 x the time to refill from empty).
  const refillPerSecond = (2 * CAPACITY) / TTL_SECONDS;
  const definition = { name: 'many', key_by: 'user', algorithm: 'token_bucket', capacity: CAPACITY, refill_per_second: refillPerSecond };
  const limit = parsePolicies(stringify({ policies: { many: { limits: [definition] } } })).get('many')!.limits[0]! as Limit;

  const redis = await startRedisServer();
  const client = redis.client();
  try {
    const version = /^redis_version:(\S+)/m.exec(await client.info('server'))?.[1] ?? '?';
    const sha = createHash('sha1').update(decideLua).digest('hex');
    await client.script('LOAD', decideLua);
    process.stdout.write(
      `Many keys: ${IDENTITIES} identities, one decision each (token bucket capacity ${CAPACITY}, refill ${refillPerSecond.toFixed(4)}/s, ` +
        `idle TTL ${TTL_SECONDS} s); the first ${SCRIPTED} by the decide script (EVALSHA, pipelines of ${PIPELINE}, ${IN_FLIGHT} in flight), the rest by the bulk script (${BULK_CHUNK} per call); Redis ${version} (${redis.url}); ` +
        `node ${process.version}, ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB\n\n`,
    );
    const started = performance.now();
    const samples: [string, Sample][] = [['empty', await sample(client, started)]];

    let next = 0;
    let denied = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < SCRIPTED) {
          const from = next;
          next = Math.min(SCRIPTED, next + PIPELINE);
          const pipeline = client.pipeline();
          for (let id = from; id < next; id++) {
            const { keys, args } = decideArguments([{ limit, identityKey: keyOf(id), cost: 1 }], 'spend');
            pipeline.evalsha(sha, keys.length, ...keys, ...args);
          }
          for (const [error, reply] of (await pipeline.exec()) ?? []) {
            if (error) throw error;
            if (!parseDecideReply(reply, 1).outcomes[0]!.allowed) denied++;
          }
        }
      }),
    );
    const scriptedSeconds = (performance.now() - started) / 1000;
    const bulkArgs = tokenBucket.scriptArgs(limit.params as never, 1);
    for (let from = SCRIPTED; from < IDENTITIES; from += BULK_CHUNK) {
      const to = Math.min(IDENTITIES, from + BULK_CHUNK);
      denied += Number(await client.eval(BULK_LUA, 0, KEY_PREFIX_OF_ID, KEY_SUFFIX, from, to, ...bulkArgs));
    }
    const loaded = await sample(client, started);
    samples.push([`after ${IDENTITIES} identities`, loaded]);
    if (denied > 0) throw new Error(`${denied} first decisions were denied`);
    await sameState(client, keyOf(0), keyOf(IDENTITIES - 1));
    process.stderr.write(`loaded in ${loaded.atSeconds.toFixed(1)} s; waiting for the TTLs\n`);

    // Redis expires keys lazily on access and actively in the background (sampling);
    // nobody reads these keys again, so the count falls by the active cycle alone.
    const deadline = performance.now() + (TTL_SECONDS + 120) * 1000;
    let last = loaded;
    let nextReport = loaded.atSeconds + TTL_SECONDS / 4;
    while (last.keys > 0 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      last = await sample(client, started);
      if (last.atSeconds >= nextReport || last.keys === 0) {
        samples.push([last.keys === 0 ? 'all expired' : 'expiring', last]);
        nextReport = last.atSeconds + TTL_SECONDS / 4;
      }
    }

    const perKey = (loaded.usedMemory - samples[0]![1].usedMemory) / loaded.keys;
    process.stdout.write(
      '| moment | s since start | keys (DBSIZE) | used_memory MiB | used_memory_rss MiB |\n|---|---:|---:|---:|---:|\n' +
        samples.map(([label, s]) => row(label, s)).join('\n') +
        '\n\n' +
        `decide script (EVALSHA, pipelined): ${Math.round(SCRIPTED / scriptedSeconds)} decisions/s over ${SCRIPTED} identities; ` +
        `load of all ${IDENTITIES}: ${loaded.atSeconds.toFixed(1)} s\n` +
        `used_memory per key: ${Math.round(perKey)} bytes\n` +
        (last.keys === 0
          ? `all keys expired ${(last.atSeconds - loaded.atSeconds).toFixed(1)} s after the last write (TTL ${TTL_SECONDS} s)\n`
          : `still ${last.keys} keys ${(last.atSeconds - loaded.atSeconds).toFixed(1)} s after the last write\n`),
    );
    if (last.keys > 0) process.exitCode = 1;
  } finally {
    await redis.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench/many-keys: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
