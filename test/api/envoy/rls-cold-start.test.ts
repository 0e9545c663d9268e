import { join } from 'node:path';
import { decideLibrary } from '../../../src/store/redis/script/decide-script.js';
import { describe, expect, it } from 'vitest';
import { watchStalls } from '../../support/loop-stalls.js';
import { d, rawShouldRateLimit } from '../../support/rls-client.js';
import { type RedisServer, startRedisServer } from '../../support/redis-server.js';
import { type ServiceProcess, startServiceProcess } from '../../support/service-process.js';

/**
 * The first store-backed ShouldRateLimit after health says SERVING is
 * answered by the store within its budget: the service warms the store path
 * (connection, the decide script's library loaded, one round trip) before
 * it reports SERVING. Each service starts with a Redis of its own, just
 * started: no library loaded, as after a Redis restart without persistence. The services of a round
 * start together (starting is what takes long); their first calls go one at
 * a time, as Envoy sends them, with its 20 ms timeout.
 */
const CONFIG = join(import.meta.dirname, 'fixtures', 'integration-basic.yaml');
const STARTS = 20;
/** A first call the machine stalled through past the service's margin (3 ms of Envoy's 20) may miss its deadline: its timing is not judged. */
const MARGIN_MS = 3;
const AT_ONCE = 4;

interface FirstCall {
  /** The decide library was in Redis when health said SERVING. */
  libraryLoaded: boolean;
  /** Script calls Redis ran for the first call other than FCALL (EVAL, EVALSHA: the store fell back to scripts). */
  evals: number;
  status: number;
  message: string;
  remaining: number | undefined;
  ms: number;
  stalled: number;
  warnings: string[];
}

/** How many EVAL and EVALSHA calls Redis has run. */
async function evalCalls(admin: ReturnType<RedisServer['client']>): Promise<number> {
  const stats = await admin.info('commandstats');
  return [...stats.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
}

describe('a cold start', () => {
  async function firstCall(service: ServiceProcess, redis: RedisServer, n: number): Promise<FirstCall> {
    const address = `127.0.0.1:${await service.port}`;
    const admin = redis.client();
    const libraries = (await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', decideLibrary.name)) as unknown[];
    const evalsBefore = await evalCalls(admin);
    const stalls = watchStalls(1);
    const answer = await rawShouldRateLimit(address, { domain: 'basic', descriptors: [d(['key1', `start-${n}`])] }, { 'grpc-timeout': '20m' });
    const stalled = stalls.stop();
    const evals = (await evalCalls(admin)) - evalsBefore;
    admin.disconnect();
    const warnings = service
      .output()
      .stdout.split('\n')
      .filter((line) => /"level":(40|50)/.test(line));
    return {
      libraryLoaded: libraries.length === 1,
      evals,
      status: answer.status,
      message: answer.message,
      remaining: answer.response?.statuses[0]?.limit_remaining,
      ms: answer.ms,
      stalled,
      warnings,
    };
  }

  it(`answers the first call from the store, ${STARTS} starts`, async () => {
    const all: FirstCall[] = [];
    for (let n = 0; n < STARTS; n += AT_ONCE) {
      const redis = await Promise.all(Array.from({ length: AT_ONCE }, () => startRedisServer()));
      const services = redis.map((server) => startServiceProcess({ QUOTA_REDIS_URL: server.url, QUOTA_RLS_CONFIG: CONFIG }));
      try {
        await Promise.all(services.map((service) => service.logged(/health SERVING/)));
        for (let i = 0; i < AT_ONCE; i++) all.push(await firstCall(services[i]!, redis[i]!, n + i));
      } finally {
        for (const service of services) service.signal('SIGKILL');
        await Promise.all(services.map((service) => service.exit));
        await Promise.all(redis.map((server) => server.stop()));
      }
    }
    // Warmed before SERVING: the library is there, and the first call is an FCALL of it.
    expect(all.filter((first) => !first.libraryLoaded || first.evals > 0)).toEqual([]);
    // Answered by the store within Envoy's deadline, unless this machine stalled past the margin meanwhile.
    expect(all.filter((first) => (first.status !== 0 || first.remaining !== 49) && first.stalled < MARGIN_MS)).toEqual([]);
  }, 180_000);
});
