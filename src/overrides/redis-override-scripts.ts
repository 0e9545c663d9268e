import type { Cluster, Redis } from 'ioredis';

/**
 * The admin API's writes of overrides, each one atomic script call (bullmq
 * style: KEYS and ARGV documented per script). Decisions read overrides in
 * the decision script itself (src/store/redis/script/override-guard.lua).
 */

/**
 * Writes the exact override of one identity.
 * KEYS[1]  rl:v1:_ovr:<limit>:<key_by>:{<identity>}, a hash {stamp, exp, rec}
 * ARGV[1]  stamp, ARGV[2] exp (unix ms, '0' never), ARGV[3] rec (the record's JSON),
 * ARGV[4]  the key's time to live in ms ('' none): past its expiry, so the
 *          decision script, not Redis, decides when it stops applying
 * Returns the record it replaced, or false.
 */
const SET_EXACT = `
local previous = redis.call('HGET', KEYS[1], 'rec')
redis.call('HSET', KEYS[1], 'stamp', ARGV[1], 'exp', ARGV[2], 'rec', ARGV[3])
if ARGV[4] == '' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return previous`;

/** KEYS[1] as SET_EXACT's; removes it. Returns the record it removed, or false. */
const DELETE_EXACT = `
local previous = redis.call('HGET', KEYS[1], 'rec')
redis.call('DEL', KEYS[1])
return previous`;

/**
 * Writes (ARGV[2] a record's JSON) or removes (ARGV[2] = '') one prefix
 * override and moves the generation on.
 * KEYS[1]  rl:v1:_ovr:{_registry}:wildcards, a hash {gen, <limit>|<prefix> = record}
 * KEYS[2]  one node only: rl:v1:_ovr:gen, set to the new generation in the same step
 * ARGV[1]  the field <limit>|<prefix>; ARGV[3] now (unix ms, the store's clock)
 * Returns { the record it replaced or removed, or '', the new generation }.
 * The generation is max(old + 1, now): it grows even if the registry was lost
 * while generation keys elsewhere survived.
 */
const WRITE_PREFIX = `
local previous = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local gen = math.max((tonumber(redis.call('HGET', KEYS[1], 'gen')) or 0) + 1, tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'gen', string.format('%d', gen))
if KEYS[2] then redis.call('SET', KEYS[2], string.format('%d', gen)) end
return { previous, string.format('%d', gen) }`;

/** KEYS[1] a slot's generation key; ARGV[1] a generation: stored unless the key holds a higher one already. */
const RAISE_GENERATION = `
if (tonumber(redis.call('GET', KEYS[1])) or 0) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1`;

/**
 * RAISE_GENERATION for many slots of one cluster master in one call, sent on
 * that master's own connection (raiseGenerationsOn). Redis refuses declared
 * keys of several slots (CROSSSLOT), so the keys travel in ARGV, as in the
 * decision's node batch (decide.lua); the flag lets the script reach them.
 * A key whose slot this node does not serve now raises an error: the keys
 * before it are raised (which is harmless to repeat), the call fails, and its
 * slots are raised again one by one, by the cluster's routing.
 * ARGV[1]  a generation; ARGV[2 ..] generation keys of slots this node serves
 */
const RAISE_GENERATIONS = `#!lua flags=allow-cross-slot-keys
local gen = tonumber(ARGV[1])
for i = 2, #ARGV do
  if (tonumber(redis.call('GET', ARGV[i])) or 0) < gen then redis.call('SET', ARGV[i], ARGV[1]) end
end
return #ARGV - 1`;

const RAISE_GENERATIONS_NAME = 'quotaOverrideRaiseGenerations';

/** Node connections that have learnt RAISE_GENERATIONS (ioredis defineCommand, EVALSHA with EVAL fallback). */
const raisers = new WeakSet<Redis>();

/** Raises the generation keys of slots that `node`, a cluster master, serves: one script call. */
export function raiseGenerationsOn(node: Redis, keys: readonly string[], generation: number): Promise<unknown> {
  if (!raisers.has(node)) {
    node.defineCommand(RAISE_GENERATIONS_NAME, { numberOfKeys: 0, lua: RAISE_GENERATIONS });
    raisers.add(node);
  }
  const run = (node as unknown as Record<string, Script>)[RAISE_GENERATIONS_NAME]!;
  return run.call(node, String(generation), ...keys);
}

type Script = (...args: (string | number)[]) => Promise<unknown>;

export interface OverrideScripts {
  setExact(key: string, stamp: string, expiresAtMs: number, record: string, ttlMs: number | undefined): Promise<string | null>;
  deleteExact(key: string): Promise<string | null>;
  writePrefix(registry: string, generationKey: string | undefined, field: string, record: string, nowMs: number): Promise<[string, string]>;
  raiseGeneration(key: string, generation: number): Promise<unknown>;
}

/** The scripts on a client (ioredis defineCommand: EVALSHA with EVAL fallback, on every node of a cluster). */
export function overrideScripts(redis: Redis | Cluster): OverrideScripts {
  redis.defineCommand('quotaOverrideSetExact', { numberOfKeys: 1, lua: SET_EXACT });
  redis.defineCommand('quotaOverrideDeleteExact', { numberOfKeys: 1, lua: DELETE_EXACT });
  redis.defineCommand('quotaOverrideWritePrefix', { lua: WRITE_PREFIX });
  redis.defineCommand('quotaOverrideRaiseGeneration', { numberOfKeys: 1, lua: RAISE_GENERATION });
  const script = (name: string): Script => {
    const run = (redis as unknown as Record<string, Script>)[name]!;
    return (...args) => run.apply(redis, args);
  };
  const setExact = script('quotaOverrideSetExact');
  const deleteExact = script('quotaOverrideDeleteExact');
  const writePrefix = script('quotaOverrideWritePrefix');
  const raise = script('quotaOverrideRaiseGeneration');
  return {
    setExact: (key, stamp, expiresAtMs, record, ttlMs) =>
      setExact(key, stamp, String(expiresAtMs), record, ttlMs === undefined ? '' : String(ttlMs)) as Promise<string | null>,
    deleteExact: (key) => deleteExact(key) as Promise<string | null>,
    writePrefix: (registry, generationKey, field, record, nowMs) => {
      const keys = generationKey === undefined ? [registry] : [registry, generationKey];
      return writePrefix(keys.length, ...keys, field, record, String(nowMs)) as Promise<[string, string]>;
    },
    raiseGeneration: (key, generation) => raise(key, String(generation)),
  };
}
