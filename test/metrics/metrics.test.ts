import { createChannel, createClient } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { DecisionSource, QuotaServiceDefinition } from '@quota-service/contract';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startServiceProcess, untilServing, type ServiceProcess } from '../support/service-process.js';

/** Reads one sample of the Prometheus text format, e.g. sample(text, 'quota_decisions_total{policy="orders",...}'). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The port the service's metrics endpoint bound, from its log line. */
async function metricsPortOf(service: ServiceProcess): Promise<number> {
  return Number(/"port":(\d+)/.exec(await service.logged(/"msg":"metrics at GET \/metrics"/))![1]);
}

/** One scrape of GET /metrics, as text. */
async function scrapeOnce(metricsPort: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
}

let redis: RedisServer | undefined;
let service: ServiceProcess | undefined;
afterAll(async () => {
  service?.signal('SIGKILL');
  await redis?.stop();
});

describe('Prometheus metrics of a real service process (QUOTA_METRICS_ADDR)', () => {
  it('counts decisions per policy, limit, result and source; store failures; circuit state; reloads; state keys', async () => {
    redis = await startRedisServer();
    service = startServiceProcess({ QUOTA_REDIS_URL: redis.url, QUOTA_METRICS_ADDR: '127.0.0.1:0', QUOTA_BREAKER_HALF_OPEN_MS: '60000' });
    const metricsPort = await metricsPortOf(service);
    const scrape = async () => {
      const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return response.text();
    };
    const channel = createChannel(`127.0.0.1:${await service.port}`);
    await untilServing(channel);
    const client = createClient(QuotaServiceDefinition, channel);
    // 11 at once against a bucket of 10 that refills 2 per second: one is denied
    // (one after another, a busy machine could take the half second a token refills in).
    const orders = await Promise.all(Array.from({ length: 11 }, () => client.allow({ policy: 'orders', identity: { user: 'metrics' } })));
    const allowed = orders.filter((decision) => decision.allowed).length;
    expect(allowed).toBeLessThan(11);
    await client.allow({ policy: 'user', identity: { user: 'metrics' } });

    let text = await scrape();
    expect(sample(text, 'quota_decisions_total{policy="orders",limit="orders",result="allowed",source="store"}')).toBe(allowed);
    expect(sample(text, 'quota_decisions_total{policy="orders",limit="orders",result="rejected",source="store"}')).toBe(11 - allowed);
    expect(sample(text, 'quota_decisions_total{policy="user",limit="user-per-minute",result="allowed",source="store"}')).toBe(1);
    expect(sample(text, 'quota_check_duration_seconds_count{source="store"}')).toBe(12);
    expect(sample(text, 'quota_check_duration_seconds_bucket{le="+Inf",source="store"}')).toBe(12);
    // One token bucket key and one fixed-window counter in Redis (DBSIZE).
    expect(sample(text, 'quota_state_keys{store="shared"}')).toBe(2);
    expect(sample(text, 'quota_state_keys{store="local"}')).toBe(0);
    expect(sample(text, 'quota_store_circuit_state{state="closed"}')).toBe(1);
    expect(sample(text, 'quota_store_circuit_state{state="open"}')).toBe(0);
    expect(sample(text, 'quota_config_reloads_total{result="success"}')).toBe(1);
    expect(sample(text, 'quota_config_reloads_total{result="failure"}')).toBe(0);
    expect(sample(text, 'quota_store_eviction_risk')).toBe(0);
    expect(sample(text, 'quota_store_decide_by_function')).toBe(1);
    expect(sample(text, 'quota_config_last_reload_success_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 600);
    expect(text).toContain('process_cpu_seconds_total');

    // Redis gone: 5 failed calls open the circuit, the 6th is not attempted; orders decides locally.
    await redis.stop();
    for (let i = 0; i < 6; i++) {
      const response = await client.allow({ policy: 'orders', identity: { user: 'outage' } });
      expect(response.source).toBe(DecisionSource.DECISION_SOURCE_LOCAL);
    }
    text = await scrape();
    const failures = (kind: string) => sample(text, `quota_store_failures_total{kind="${kind}"}`) ?? 0;
    expect(failures('error') + failures('timeout')).toBe(5);
    expect(failures('circuit_open')).toBe(1);
    expect(sample(text, 'quota_store_circuit_state{state="open"}')).toBe(1);
    expect(sample(text, 'quota_decisions_total{policy="orders",limit="orders",result="allowed",source="local"}')).toBe(5);
    expect(sample(text, 'quota_decisions_total{policy="orders",limit="orders",result="rejected",source="local"}')).toBe(1);
    expect(sample(text, 'quota_state_keys{store="local"}')).toBe(1);
    // The last shared count stays when Redis cannot be asked.
    expect(sample(text, 'quota_state_keys{store="shared"}')).toBe(2);

    const notFound = await fetch(`http://127.0.0.1:${metricsPort}/`);
    expect(notFound.status).toBe(404);
    channel.close();
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('a Redis user without the FUNCTION command: the decide script goes as EVALSHA, a warning says why, quota_store_decide_by_function is 0', async () => {
    const limited = await startRedisServer();
    const admin = limited.client();
    await admin.call('ACL', 'SETUSER', 'no-functions', 'on', '>secret', '~*', '+@all', '-function');
    admin.disconnect();
    const scripted = startServiceProcess({ QUOTA_REDIS_URL: `redis://no-functions:secret@127.0.0.1:${limited.port}`, QUOTA_METRICS_ADDR: '127.0.0.1:0' });
    try {
      const metricsPort = await metricsPortOf(scripted);
      const warning = await scripted.logged(/"msg":"decide script sent as EVALSHA/);
      expect(warning).toMatch(/"level":40,/);
      expect(warning).toMatch(/"reason":"FUNCTION LOAD failed: NOPERM /);
      expect(await scripted.logged(/"msg":"store ready: health SERVING"/)).toContain('"decide":"EVALSHA (FUNCTION LOAD failed: NOPERM ');
      const channel = createChannel(`127.0.0.1:${await scripted.port}`);
      await untilServing(channel);
      const decision = await createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'scripted' } });
      expect([decision.allowed, decision.source]).toEqual([true, DecisionSource.DECISION_SOURCE_STORE]);
      channel.close();
      const text = await scrapeOnce(metricsPort);
      expect(sample(text, 'quota_store_decide_by_function')).toBe(0);
      scripted.signal('SIGTERM');
      expect(await scripted.exit).toBe(0);
    } finally {
      scripted.signal('SIGKILL');
      await limited.stop();
    }
  });

  it('quota_store_eviction_risk is 1 when Redis may evict quota state (maxmemory-policy allkeys-lru)', async () => {
    const evicting = await startRedisServer({ args: ['--maxmemory-policy', 'allkeys-lru'] });
    const risky = startServiceProcess({ QUOTA_REDIS_URL: evicting.url, QUOTA_METRICS_ADDR: '127.0.0.1:0' });
    try {
      const metricsPort = await metricsPortOf(risky);
      const channel = createChannel(`127.0.0.1:${await risky.port}`);
      await untilServing(channel);
      channel.close();
      const text = await scrapeOnce(metricsPort);
      expect(sample(text, 'quota_store_eviction_risk')).toBe(1);
      risky.signal('SIGTERM');
      expect(await risky.exit).toBe(0);
    } finally {
      risky.signal('SIGKILL');
      await evicting.stop();
    }
  });
});
