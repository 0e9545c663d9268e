// `make bench`, second part: per algorithm, decisions/s of the decide script on
// one Redis (RedisStore, production client settings, no gRPC) and Redis memory
// per identity after N distinct identities made one decision each.
//
//   npx tsx bench/algorithms.ts [--identities 100000] [--concurrency 256]
import { identityKey, type Limit, parsePolicies } from '@quota-service/core';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { stringify } from 'yaml';
import { decideLimit } from '../test/support/store-calls.js';

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at === -1 ? fallback : Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name}: expected a positive whole number`);
  return value;
}

const IDENTITIES = flag('identities', 100_000);
const CONCURRENCY = flag('concurrency', 256);

// Each identity spends 1 unit of 100. Rates are slow enough (1 unit per 100 s)
// that no state expires during the run: the figure is the state an identity
// keeps while it is remembered (a full GCRA or leaky bucket has no key at all).
const definitions: Record<string, Record<string, unknown>> = {
  token_bucket: { algorithm: 'token_bucket', capacity: 100, refill_per_second: 0.01 },
  gcra: { algorithm: 'gcra', capacity: 100, refill_per_second: 0.01 },
  fixed_window: { algorithm: 'fixed_window', limit: 100, window: 'minute' },
  sliding_window_counter: { algorithm: 'sliding_window_counter', limit: 100, window: 'minute' },
  sliding_window_log: { algorithm: 'sliding_window_log', limit: 100, window: 'minute' },
  leaky_bucket: { algorithm: 'leaky_bucket', capacity: 100, leak_per_second: 0.01 },
};

async function main(): Promise<void> {
  const redis = await startRedisServer();
  const info = redis.client();
  const store = RedisStore.connect(redis.url);
  try {
    await store.ready();
    const rows: string[] = [];
    for (const [name, definition] of Object.entries(definitions)) {
      const limit = parsePolicies(stringify({ policies: { b: { limits: [{ name: 'b', key_by: 'user', ...definition }] } } })).get('b')!.limits[0]! as Limit;
      await info.flushall();
      const before = await usedMemory(info);
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < IDENTITIES) {
            const id = next++;
            const outcome = await decideLimit(store, limit, identityKey('b', 'user', `user-${id}`), 1);
            if (!outcome.allowed) throw new Error(`${name}: identity ${id} denied on its first request`);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const bytes = (await usedMemory(info)) - before;
      const keys = await info.dbsize();
      rows.push(`| ${name} | ${Math.round(IDENTITIES / seconds)} | ${Math.round(bytes / IDENTITIES)} | ${keys} |`);
      process.stderr.write(`${name}: done\n`);
    }
    process.stdout.write(
      `Per algorithm: ${IDENTITIES} distinct identities, one decision each, ${CONCURRENCY} in flight, one client (auto-pipelining)\n\n` +
        '| algorithm | decisions/s | Redis bytes per identity | keys |\n|---|---:|---:|---:|\n' +
        rows.join('\n') +
        '\n',
    );
  } finally {
    await store.close();
    await redis.stop();
  }
}

async function usedMemory(client: ReturnType<Awaited<ReturnType<typeof startRedisServer>>['client']>): Promise<number> {
  const text = await client.info('memory');
  const match = /^used_memory:(\d+)/m.exec(text);
  if (match === null) throw new Error('INFO memory has no used_memory');
  return Number(match[1]);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench/algorithms: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
