import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { identityKey, type Limit, type LimitCall, VirtualClock } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { decideLibrary } from '../../src/store/redis/script/decide-script.js';
import { clearOfRealExpiry, startTime, timeStep } from '../support/lua-vs-model.js';
import { commandCalls } from '../support/script-calls.js';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { decideGroup, decideGroups } from '../support/store-calls.js';
import { useRedisServer } from '../support/use-redis.js';

/**
 * The decide script as a Redis Function library (FUNCTION LOAD, then FCALL),
 * as RedisStore.ready() sets it up, against the same script sent as EVALSHA:
 * which command Redis runs, the same decisions, a library lost and loaded
 * again, and a Redis user the library is refused to.
 */
const every: Limit[] = [
  limitFrom({ name: 'bucket', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 }),
  limitFrom({ name: 'window', key_by: 'user', algorithm: 'fixed_window', limit: 3, window: 'minute' }),
  limitFrom({ name: 'log', key_by: 'user', algorithm: 'sliding_window_log', limit: 4, window: 'second' }),
  limitFrom({ name: 'counter', key_by: 'user', algorithm: 'sliding_window_counter', limit: 5, window: 'second' }),
  limitFrom({ name: 'police', key_by: 'user', algorithm: 'leaky_bucket', capacity: 6, leak_per_second: 3 }),
  limitFrom({ name: 'shape', key_by: 'user', algorithm: 'leaky_bucket', capacity: 6, leak_per_second: 3, mode: 'shaping' }),
  limitFrom({ name: 'gcra', key_by: 'user', algorithm: 'gcra', capacity: 7, refill_per_second: 4 }),
];
const calls = (limits: readonly Limit[], who: string, cost = 1): LimitCall[] =>
  limits.map((limit) => ({ limit, identityKey: identityKey(limit.name, limit.keyBy, who), cost }));

/** Calls of each way to run the script since the last CONFIG RESETSTAT (INFO commandstats). */
async function commandCounts(redis: Redis): Promise<Record<'fcall' | 'evalsha' | 'eval', number>> {
  const [fcall, evalsha, evalCalls] = await Promise.all(['fcall', 'evalsha', 'eval'].map((command) => commandCalls(redis, command)));
  return { fcall: fcall!, evalsha: evalsha!, eval: evalCalls! };
}

async function libraries(redis: Redis): Promise<string[]> {
  const list = (await redis.call('FUNCTION', 'LIST')) as unknown[][];
  return list.map((library) => String(library[library.indexOf('library_name') + 1]));
}

const server = useRedisServer();
let admin: Redis;
beforeAll(() => {
  admin = server().client();
});
afterAll(() => admin.disconnect());
beforeEach(async () => {
  await admin.flushdb();
  await admin.call('FUNCTION', 'FLUSH');
  await admin.config('RESETSTAT');
});

describe('the decide script as a function library', () => {
  it('after ready(), every decision goes as FCALL of the library (one call, a batch, the warm-up): no script is sent', async () => {
    const store = new RedisStore(server().client(), { clock: new VirtualClock(T0) });
    try {
      await store.ready();
      expect(store.parts.decideCommand()).toEqual({ command: 'FCALL', detail: `library ${decideLibrary.name}` });
      expect(await libraries(admin)).toEqual([decideLibrary.name]);
      const one = await decideGroup(store, calls(every.slice(0, 2), 'u1'), 'spend');
      expect(one.outcomes.map((o) => o.remaining)).toEqual([9, 2]);
      const batch = await decideGroups(
        store,
        ['u2', 'u3', 'u4'].map((who) => calls(every, who)),
        'spend',
      );
      expect(batch.every((answer) => !(answer instanceof Error) && answer.outcomes.every((o) => o.allowed))).toBe(true);
      const counts = await commandCounts(admin);
      expect(counts.evalsha + counts.eval).toBe(0);
      // The warm-up check, the single call and the batch.
      expect(counts.fcall).toBe(3);
    } finally {
      await store.close();
    }
  });

  it('a Redis that holds the library already (another service started first): kept as it is, not loaded again, and called', async () => {
    const first = new RedisStore(server().client(), { clock: new VirtualClock(T0) });
    const second = new RedisStore(server().client(), { clock: new VirtualClock(T0) });
    try {
      await first.ready();
      await second.ready();
      expect(second.parts.decideCommand().command).toBe('FCALL');
      // The second FUNCTION LOAD was refused ("already exists"): nothing was replaced.
      expect(/^cmdstat_function\|load:calls=(\d+),.*failed_calls=(\d+)/m.exec(await admin.info('commandstats'))?.slice(1)).toEqual(['2', '1']);
      expect((await decideGroup(second, calls(every.slice(0, 1), 'u1'), 'spend')).outcomes[0]!.remaining).toBe(9);
      expect((await commandCounts(admin)).evalsha).toBe(0);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });

  it('functions: false (QUOTA_REDIS_FUNCTIONS=false): EVALSHA, and no library is loaded', async () => {
    const store = new RedisStore(server().client(), { clock: new VirtualClock(T0), functions: false });
    try {
      await store.ready();
      expect(store.parts.decideCommand()).toEqual({ command: 'EVALSHA', detail: 'QUOTA_REDIS_FUNCTIONS is false' });
      await decideGroup(store, calls(every, 'u1'), 'spend');
      expect(await libraries(admin)).toEqual([]);
      const counts = await commandCounts(admin);
      expect(counts.fcall).toBe(0);
      expect(counts.evalsha).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });

  it('FUNCTION FLUSH between two batches: the library is loaded again and the next batch decides, right', async () => {
    const store = new RedisStore(server().client(), { clock: new VirtualClock(T0) });
    try {
      await store.ready();
      const batch = () => Promise.all(['a', 'b', 'c'].map((who) => decideGroup(store, calls(every.slice(0, 1), who), 'spend')));
      expect((await batch()).map((d) => d.outcomes[0]!.remaining)).toEqual([9, 9, 9]);
      await admin.call('FUNCTION', 'FLUSH');
      await admin.config('RESETSTAT');
      expect((await batch()).map((d) => d.outcomes[0]!.remaining)).toEqual([8, 8, 8]);
      expect(await libraries(admin)).toEqual([decideLibrary.name]);
      // Refused once ("Function not found"), loaded, sent again: still FCALL.
      expect(await commandCounts(admin)).toEqual({ fcall: 2, evalsha: 0, eval: 0 });
      expect(store.parts.decideCommand().command).toBe('FCALL');
    } finally {
      await store.close();
    }
  });

  it('a Redis user without the FUNCTION command: ready() keeps the store on EVALSHA and says why; it decides all the same', async () => {
    await admin.call('ACL', 'SETUSER', 'no-functions', 'on', '>secret', '~*', '+@all', '-function');
    const client = new Redis(server().port, server().host, { username: 'no-functions', password: 'secret', maxRetriesPerRequest: 1 });
    const store = new RedisStore(client, { clock: new VirtualClock(T0) });
    try {
      await store.ready();
      const { command, detail } = store.parts.decideCommand();
      expect(command).toBe('EVALSHA');
      expect(detail).toMatch(/^FUNCTION LOAD failed: NOPERM /);
      expect((await decideGroup(store, calls(every.slice(0, 2), 'u1'), 'spend')).outcomes.map((o) => o.remaining)).toEqual([9, 2]);
      expect(await libraries(admin)).toEqual([]);
    } finally {
      await store.close();
      await admin.call('ACL', 'DELUSER', 'no-functions');
    }
  });

  it("on Redis's own clock, each FCALL reads the time anew (nothing of one call is left for the next)", async () => {
    const store = new RedisStore(server().client());
    try {
      await store.ready();
      const first = await decideGroup(store, calls(every.slice(0, 1), 'u1'), 'spend');
      const later = Date.now() + 5;
      while (Date.now() < later) await new Promise((resolve) => setTimeout(resolve, 1));
      const second = await decideGroup(store, calls(every.slice(0, 1), 'u1'), 'spend');
      expect(second.nowMs).toBeGreaterThanOrEqual(first.nowMs + 5);
    } finally {
      await store.close();
    }
  });
});

describe('FCALL decides as EVALSHA', () => {
  it('random sequences over every algorithm: the same answers, one call at a time and in batches, spends and peeks', async () => {
    const clock = new VirtualClock(T0);
    const viaFunctions = new RedisStore(server().client(), { clock });
    const viaScripts = new RedisStore(server().client(), { clock, functions: false });
    try {
      await Promise.all([viaFunctions.ready(), viaScripts.ready()]);
      expect([viaFunctions.parts.decideCommand().command, viaScripts.parts.decideCommand().command]).toEqual(['FCALL', 'EVALSHA']);
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          startTime,
          fc.array(
            fc.tuple(
              timeStep,
              fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.subarray(every, { minLength: 1 })), { minLength: 1, maxLength: 4 }),
              fc.constantFrom('spend', 'peek'),
            ),
            { minLength: 1, maxLength: 20 },
          ),
          async (start, steps) => {
            // Each run on identities of its own: the two stores never share a key.
            run++;
            let now = clearOfRealExpiry(start);
            for (const [step, groups, mode] of steps) {
              now = clearOfRealExpiry(now + step);
              clock.set(now);
              const on = (store: RedisStore, side: string) =>
                decideGroups(
                  store,
                  groups.map(([cost, limits], i) => calls(limits, `${side}-${run}-${i % 2}`, mode === 'peek' ? 0 : cost)),
                  mode,
                );
              const [functions, scripts] = await Promise.all([on(viaFunctions, 'f'), on(viaScripts, 's')]);
              expect(functions).toEqual(scripts);
            }
          },
        ),
        { numRuns: 40 },
      );
      const counts = await commandCounts(admin);
      expect(counts.fcall).toBeGreaterThan(0);
      expect(counts.evalsha).toBeGreaterThan(0);
    } finally {
      await Promise.all([viaFunctions.close(), viaScripts.close()]);
    }
  });
});
