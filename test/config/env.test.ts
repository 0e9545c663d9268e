import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/env.js';

describe('environment configuration', () => {
  it('has the documented defaults and no Redis (embedded store)', () => {
    expect(loadConfig({ PATH: '/usr/bin' })).toEqual({
      QUOTA_GRPC_ADDR: '0.0.0.0:50051',
      QUOTA_POLICIES: 'config/policies.yaml',
      QUOTA_LOG_LEVEL: 'info',
      QUOTA_SHUTDOWN_GRACE_MS: 10_000,
      QUOTA_STORE_TIMEOUT_MS: 50,
      QUOTA_BREAKER_FAILURES: 5,
      QUOTA_BREAKER_HALF_OPEN_MS: 1_000,
      unknownVariables: [],
    });
  });

  it('reads every variable', () => {
    const config = loadConfig({
      QUOTA_GRPC_ADDR: '[::1]:7000',
      QUOTA_REDIS_URL: 'rediss://cache.internal:6380/0',
      QUOTA_POLICIES: '/etc/quota/policies.yaml',
      QUOTA_METRICS_ADDR: '0.0.0.0:9464',
      QUOTA_LOG_LEVEL: 'debug',
      QUOTA_SHUTDOWN_GRACE_MS: '2500',
    });
    expect(config).toMatchObject({ QUOTA_GRPC_ADDR: '[::1]:7000', QUOTA_REDIS_URL: 'rediss://cache.internal:6380/0', QUOTA_METRICS_ADDR: '0.0.0.0:9464', QUOTA_SHUTDOWN_GRACE_MS: 2500 });
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ QUOTA_REDIS_URL: '' }).QUOTA_REDIS_URL).toBeUndefined();
  });

  it.each([
    ['QUOTA_GRPC_ADDR', 'localhost'],
    ['QUOTA_GRPC_ADDR', '0.0.0.0:70000'],
    ['QUOTA_REDIS_URL', 'http://localhost:6379'],
    ['QUOTA_REDIS_URL', 'not a url'],
    ['QUOTA_METRICS_ADDR', ':9464:'],
    ['QUOTA_LOG_LEVEL', 'loud'],
    ['QUOTA_SHUTDOWN_GRACE_MS', 'soon'],
    ['QUOTA_REDIS_CLUSTER', ','],
    ['QUOTA_REDIS_CLUSTER', '127.0.0.1'],
    ['QUOTA_REDIS_CLUSTER', '127.0.0.1:7000;127.0.0.1:7001'],
    ['QUOTA_REDIS_CLUSTER', 'redis://'],
    ['QUOTA_REDIS_CLUSTER', 'redis://10.0.0.1'],
    ['QUOTA_REDIS_CLUSTER', 'http://10.0.0.1:6379'],
    ['QUOTA_REDIS_CLUSTER', '10.0.0.1:6379,rediss://10.0.0.2:6379'],
    ['QUOTA_REDIS_CLUSTER', 'redis://:a@10.0.0.1:6379,redis://:b@10.0.0.2:6379'],
  ])('fails fast naming %s when it is %j', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^invalid configuration:\\n  ${name}: `));
  });

  it('reads Redis Cluster seeds as a list', () => {
    expect(loadConfig({ QUOTA_REDIS_CLUSTER: '10.0.0.1:6379, 10.0.0.2:6379,' }).QUOTA_REDIS_CLUSTER).toEqual(['10.0.0.1:6379', '10.0.0.2:6379']);
    expect(loadConfig({ QUOTA_REDIS_CLUSTER: '[::1]:7000' }).QUOTA_REDIS_CLUSTER).toEqual(['[::1]:7000']);
    expect(loadConfig({ QUOTA_REDIS_CLUSTER: 'rediss://:s3cret@a.internal:6380,rediss://:s3cret@b.internal:6380' }).QUOTA_REDIS_CLUSTER).toHaveLength(2);
  });

  it('refuses a single node and a cluster at once, naming both variables', () => {
    expect(() => loadConfig({ QUOTA_REDIS_URL: 'redis://10.0.0.1:6379', QUOTA_REDIS_CLUSTER: '10.0.0.1:6379' })).toThrow(
      'invalid configuration:\n  QUOTA_REDIS_CLUSTER: set either QUOTA_REDIS_URL (one node) or QUOTA_REDIS_CLUSTER (cluster seeds), not both',
    );
  });

  it('reports unknown QUOTA_* variables instead of failing (Kubernetes service links set some)', () => {
    expect(loadConfig({ QUOTA_PORT: 'tcp://10.0.0.1:50051', OTHER: 'x' }).unknownVariables).toEqual(['QUOTA_PORT']);
  });
});
