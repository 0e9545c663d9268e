// The chart writes the Redis password into the connection string with Go's `urlquery`
// (templates/_helpers.tpl): does the service decode it back? Checked on a real
// redis-server with requirepass, using the password of the ci/ example.
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { parseClusterSeed } from '../../src/store/redis/cluster-seeds.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { useRedisServer } from '../support/use-redis.js';
import { parse } from 'yaml';
import { helperBody, readChartFile } from './chart.js';

/** Go's url.QueryEscape, which the template function `urlquery` is: unreserved bytes stay, space is '+', the rest %XX. */
function goQueryEscape(text: string): string {
  return [...Buffer.from(text, 'utf8')]
    .map((byte) => {
      const char = String.fromCharCode(byte);
      if (/[A-Za-z0-9\-_.~]/.test(char)) return char;
      if (char === ' ') return '+';
      return `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
}

const ciPassword = (parse(readChartFile('ci/single-node-redis.yaml')) as { redis: { password: string } }).redis.password;

describe('Redis credentials in the connection string', () => {
  const redis = useRedisServer({ password: ciPassword });

  it('the chart escapes user and password with urlquery', () => {
    expect(helperBody('quota-service.redisUserinfo')).toContain('(urlquery .Values.redis.username) (urlquery .Values.redis.password)');
    expect(ciPassword).toMatch(/[/:@]/);
  });

  it('a single-node URL built like the chart builds it passes the env schema and authenticates', async () => {
    const url = `redis://:${goQueryEscape(ciPassword)}@127.0.0.1:${redis().port}/1`;
    expect(loadConfig({ QUOTA_REDIS_URL: url }).QUOTA_REDIS_URL).toBe(url);
    const store = RedisStore.connect(url);
    try {
      // A wrong password never gets ready (ready() waits for an answered PING): bound the wait.
      const outcome = await Promise.race([store.ready().then(() => 'ready'), delay(5_000, 'not ready after 5 s', { ref: false })]);
      expect(outcome).toBe('ready');
    } finally {
      await store.close();
    }
  });

  it('the same password unescaped is refused at start, naming the variable (why the chart escapes)', () => {
    expect(() => loadConfig({ QUOTA_REDIS_URL: `redis://:${ciPassword}@127.0.0.1:${redis().port}/1` })).toThrow(/QUOTA_REDIS_URL/);
  });

  it('cluster seeds built like the chart builds them decode to the same user and password', () => {
    const seed = parseClusterSeed(`rediss://${goQueryEscape('quota')}:${goQueryEscape(ciPassword)}@10.0.0.1:6379`);
    expect(seed).toEqual({ host: '10.0.0.1', port: 6379, username: 'quota', password: ciPassword, tls: true });
  });

  it('a space does not survive (docs/deploy.md says to keep spaces out of chart-managed passwords)', () => {
    expect(decodeURIComponent(goQueryEscape('a b'))).toBe('a+b');
  });
});
