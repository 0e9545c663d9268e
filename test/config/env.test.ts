import { describe, expect, it } from 'vitest';
import { closestVariable, ConfigError, loadConfig, unknownVariableMessage } from '../../src/config/env.js';

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
      QUOTA_MAX_PENDING_DECISIONS: 50_000,
      QUOTA_MAX_PENDING_DECISIONS_PER_CALLER: 10_000,
      QUOTA_CLOCK_SKEW_ALLOWANCE_MS: 0,
      QUOTA_RLS_STORE_TIMEOUT_MS: 10,
      QUOTA_RLS_SHADOW_MODE: false,
      QUOTA_RLS_RATELIMIT_HEADERS: true,
      QUOTA_RLS_NEAR_LIMIT_RATIO: 0.8,
      QUOTA_STRICT_ENV: false,
      QUOTA_REDIS_FUNCTIONS: true,
      unknownVariables: [],
    });
  });

  it('reads every variable', () => {
    const config = loadConfig({
      QUOTA_GRPC_ADDR: '[::1]:7000',
      QUOTA_REDIS_URL: 'rediss://cache.internal:6380/0',
      QUOTA_POLICIES: '/etc/quota/policies.yaml',
      QUOTA_METRICS_ADDR: '0.0.0.0:9464',
      QUOTA_HEALTH_ADDR: '0.0.0.0:50052',
      QUOTA_LOG_LEVEL: 'debug',
      QUOTA_SHUTDOWN_GRACE_MS: '2500',
      QUOTA_MAX_PENDING_DECISIONS: '20000',
      QUOTA_MAX_PENDING_DECISIONS_PER_CALLER: '500',
      QUOTA_CLOCK_SKEW_ALLOWANCE_MS: '20',
    });
    expect(config).toMatchObject({
      QUOTA_MAX_PENDING_DECISIONS: 20_000,
      QUOTA_MAX_PENDING_DECISIONS_PER_CALLER: 500,
      QUOTA_CLOCK_SKEW_ALLOWANCE_MS: 20,
      QUOTA_GRPC_ADDR: '[::1]:7000',
      QUOTA_REDIS_URL: 'rediss://cache.internal:6380/0',
      QUOTA_METRICS_ADDR: '0.0.0.0:9464',
      QUOTA_HEALTH_ADDR: '0.0.0.0:50052',
      QUOTA_SHUTDOWN_GRACE_MS: 2500,
    });
  });

  it("reads the rate limit service's variables, and names a bad one", () => {
    expect(
      loadConfig({
        QUOTA_RLS_CONFIG: '/etc/quota/rls',
        QUOTA_RLS_STORE_TIMEOUT_MS: '15',
        QUOTA_RLS_SHADOW_MODE: 'true',
        QUOTA_RLS_RATELIMIT_HEADERS: 'false',
        QUOTA_RLS_NEAR_LIMIT_RATIO: '0.9',
      }),
    ).toMatchObject({
      QUOTA_RLS_CONFIG: '/etc/quota/rls',
      QUOTA_RLS_STORE_TIMEOUT_MS: 15,
      QUOTA_RLS_SHADOW_MODE: true,
      QUOTA_RLS_RATELIMIT_HEADERS: false,
      QUOTA_RLS_NEAR_LIMIT_RATIO: 0.9,
    });
    expect(() => loadConfig({ QUOTA_RLS_SHADOW_MODE: 'maybe' })).toThrow(/QUOTA_RLS_SHADOW_MODE: expected true or false/);
    expect(() => loadConfig({ QUOTA_RLS_NEAR_LIMIT_RATIO: '2' })).toThrow(/QUOTA_RLS_NEAR_LIMIT_RATIO/);
  });

  it('refuses a Redis URL without a host (redis:/host parses with an empty host, which would mean localhost)', () => {
    expect(() => loadConfig({ QUOTA_REDIS_URL: 'redis:/cache.internal:6379/0' })).toThrow(/QUOTA_REDIS_URL: expected redis:\/\/host:port/);
    expect(() => loadConfig({ QUOTA_REDIS_CLUSTER: 'redis:/10.0.0.1:6379' })).toThrow(/QUOTA_REDIS_CLUSTER: expected a comma-separated list/);
  });

  it('refuses a health address that is not host:port, naming it', () => {
    expect(() => loadConfig({ QUOTA_HEALTH_ADDR: '50052' })).toThrow(/QUOTA_HEALTH_ADDR: expected host:port/);
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
    ['QUOTA_MAX_PENDING_DECISIONS', '0'],
    ['QUOTA_MAX_PENDING_DECISIONS_PER_CALLER', 'many'],
    ['QUOTA_CLOCK_SKEW_ALLOWANCE_MS', '-1'],
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

  describe('TLS towards Redis (QUOTA_REDIS_TLS_CA, QUOTA_REDIS_TLS_CERT, QUOTA_REDIS_TLS_KEY)', () => {
    const files = {
      QUOTA_REDIS_TLS_CA: '/etc/quota/redis-ca.pem',
      QUOTA_REDIS_TLS_CERT: '/etc/quota/redis-client.crt',
      QUOTA_REDIS_TLS_KEY: '/etc/quota/redis-client.key',
    };

    it('reads them with a rediss:// URL or rediss:// cluster seeds (the scheme in any case)', () => {
      expect(loadConfig({ QUOTA_REDIS_URL: 'rediss://redis.internal:6380', ...files })).toMatchObject(files);
      expect(loadConfig({ QUOTA_REDIS_CLUSTER: 'rediss://10.0.0.1:6380,rediss://10.0.0.2:6380', ...files })).toMatchObject(files);
      expect(loadConfig({ QUOTA_REDIS_URL: 'REDISS://redis.internal:6380', QUOTA_REDIS_TLS_CA: files.QUOTA_REDIS_TLS_CA }).QUOTA_REDIS_TLS_CA).toBe(
        files.QUOTA_REDIS_TLS_CA,
      );
      // A CA alone (verify Redis, no client certificate) and a client certificate alone (system CAs) are both fine.
      expect(() =>
        loadConfig({
          QUOTA_REDIS_URL: 'rediss://redis.internal:6380',
          QUOTA_REDIS_TLS_CERT: files.QUOTA_REDIS_TLS_CERT,
          QUOTA_REDIS_TLS_KEY: files.QUOTA_REDIS_TLS_KEY,
        }),
      ).not.toThrow();
    });

    it.each([
      [
        'a certificate without its key',
        { QUOTA_REDIS_URL: 'rediss://r:6380', QUOTA_REDIS_TLS_CERT: files.QUOTA_REDIS_TLS_CERT },
        ['QUOTA_REDIS_TLS_KEY: required with QUOTA_REDIS_TLS_CERT'],
      ],
      [
        'a key without its certificate',
        { QUOTA_REDIS_URL: 'rediss://r:6380', QUOTA_REDIS_TLS_KEY: files.QUOTA_REDIS_TLS_KEY },
        ['QUOTA_REDIS_TLS_CERT: required with QUOTA_REDIS_TLS_KEY'],
      ],
      [
        'a CA with a plain redis:// URL',
        { QUOTA_REDIS_URL: 'redis://r:6379', QUOTA_REDIS_TLS_CA: files.QUOTA_REDIS_TLS_CA },
        ['QUOTA_REDIS_TLS_CA: only applies to TLS connections to Redis, but QUOTA_REDIS_URL is a plain redis:// URL (use rediss:// for TLS)'],
      ],
      [
        'a client certificate with host:port cluster seeds',
        {
          QUOTA_REDIS_CLUSTER: '10.0.0.1:6379,10.0.0.2:6379',
          QUOTA_REDIS_TLS_CERT: files.QUOTA_REDIS_TLS_CERT,
          QUOTA_REDIS_TLS_KEY: files.QUOTA_REDIS_TLS_KEY,
        },
        [
          'QUOTA_REDIS_TLS_CERT: only applies to TLS connections to Redis, but QUOTA_REDIS_CLUSTER seeds are plain (give them as rediss://host:port URLs for TLS)',
          'QUOTA_REDIS_TLS_KEY: only applies to TLS connections to Redis, but QUOTA_REDIS_CLUSTER seeds are plain',
        ],
      ],
      [
        'a CA with redis:// cluster seeds',
        { QUOTA_REDIS_CLUSTER: 'redis://:pw@10.0.0.1:6379', QUOTA_REDIS_TLS_CA: files.QUOTA_REDIS_TLS_CA },
        ['QUOTA_REDIS_TLS_CA: only applies to TLS connections to Redis, but QUOTA_REDIS_CLUSTER seeds are plain'],
      ],
      [
        'any of them without Redis (the embedded store)',
        files,
        [
          'QUOTA_REDIS_TLS_CA: only applies to TLS connections to Redis, but no Redis is configured (set QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER with rediss://)',
          'QUOTA_REDIS_TLS_CERT: only applies',
          'QUOTA_REDIS_TLS_KEY: only applies',
        ],
      ],
    ])('refuses %s, naming each variable that would do nothing', (_case, env, messages) => {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      let message = '';
      try {
        loadConfig(env);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message.startsWith('invalid configuration:\n  QUOTA_REDIS_TLS_')).toBe(true);
      for (const expected of messages) expect(message).toContain(`\n  ${expected}`);
      // Exactly the variables named above, each once.
      expect(message.split('\n').length - 1).toBe(messages.length);
    });

    it('reports an unparsable URL as the URL error alone, with or without a TLS file (not a raw TypeError)', () => {
      for (const extra of [{}, { QUOTA_REDIS_TLS_CA: '/etc/ca.pem' }]) {
        // A password with an unescaped '/' and '#' breaks the URL.
        const load = () => loadConfig({ QUOTA_REDIS_URL: 'rediss://:pa/ss#word@127.0.0.1:6380', ...extra });
        expect(load).toThrow(ConfigError);
        // The value is quoted with its password replaced.
        expect(load).toThrow(
          /^invalid configuration:\n {2}QUOTA_REDIS_URL: expected redis:\/\/host:port or rediss:\/\/host:port \(got "rediss:\/\/:\*\*\*@127\.0\.0\.1:6380"\)$/,
        );
      }
    });

    it('treats empty ones as unset', () => {
      expect(
        loadConfig({ QUOTA_REDIS_URL: 'redis://r:6379', QUOTA_REDIS_TLS_CA: '', QUOTA_REDIS_TLS_CERT: '', QUOTA_REDIS_TLS_KEY: '' }).QUOTA_REDIS_TLS_CA,
      ).toBeUndefined();
    });
  });

  it('reports unknown QUOTA_* variables instead of failing (Kubernetes service links set some)', () => {
    expect(loadConfig({ QUOTA_PORT: 'tcp://10.0.0.1:50051', OTHER: 'x' }).unknownVariables).toEqual(['QUOTA_PORT']);
  });

  describe('errors quote the value', () => {
    const messageOf = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      throw new Error('expected the configuration to be refused');
    };

    it('QUOTA_STORE_TIMEOUT_MS=fast: "expected a number", and the value', () => {
      expect(messageOf({ QUOTA_STORE_TIMEOUT_MS: 'fast' })).toBe('invalid configuration:\n  QUOTA_STORE_TIMEOUT_MS: expected a number (got "fast")');
    });

    it.each([
      ['QUOTA_GRPC_ADDR', 'localhost'],
      ['QUOTA_LOG_LEVEL', 'loud'],
      ['QUOTA_SHUTDOWN_GRACE_MS', '2.5'],
      ['QUOTA_MAX_PENDING_DECISIONS', '0'],
      ['QUOTA_RLS_SHADOW_MODE', 'maybe'],
      ['QUOTA_RLS_NEAR_LIMIT_RATIO', '1.5'],
      ['QUOTA_REDIS_CLUSTER', '127.0.0.1'],
      ['QUOTA_STRICT_ENV', 'on'],
      ['QUOTA_REDIS_FUNCTIONS', 'sometimes'],
    ])('%s=%s', (name, value) => {
      expect(messageOf({ [name]: value })).toMatch(
        new RegExp(`^invalid configuration:\\n  ${name}: .+ \\(got ${JSON.stringify(value).replace(/[.*]/g, '\\$&')}\\)$`),
      );
    });

    it('never a password: a URL or seed has it replaced by ***', () => {
      const message = messageOf({ QUOTA_REDIS_CLUSTER: 'redis://:s3cret@10.0.0.1:6379,redis://:other@10.0.0.2:6379' });
      expect(message).toContain('(got "redis://:***@10.0.0.1:6379,redis://:***@10.0.0.2:6379")');
      expect(message).not.toMatch(/s3cret|other/);
    });
  });

  describe('unknown variables', () => {
    it('name the closest known variable: a swap, a missing or an extra character', () => {
      expect(closestVariable('QUOTA_REDIS_ULR')).toBe('QUOTA_REDIS_URL');
      expect(closestVariable('QUOTA_LOGLEVEL')).toBe('QUOTA_LOG_LEVEL');
      expect(closestVariable('QUOTA_REDIS_CLUSTERS')).toBe('QUOTA_REDIS_CLUSTER');
      expect(closestVariable('quota_grpc_addr')).toBe('QUOTA_GRPC_ADDR');
      // Nothing close: no guess (a Kubernetes service link).
      expect(closestVariable('QUOTA_QUOTA_SERVICE_PORT')).toBeUndefined();
      expect(unknownVariableMessage('QUOTA_REDIS_ULR')).toBe('unknown variable; did you mean QUOTA_REDIS_URL?');
      expect(unknownVariableMessage('QUOTA_PORT')).toBe('unknown variable');
    });

    it('QUOTA_STRICT_ENV refuses them, each named with its closest known variable, with any invalid value', () => {
      expect(() => loadConfig({ QUOTA_STRICT_ENV: '1', QUOTA_PORT: 'tcp://10.0.0.1:50051' })).toThrow(ConfigError);
      expect(() => loadConfig({ QUOTA_STRICT_ENV: 'true', QUOTA_REDIS_ULR: 'redis://r:6379', QUOTA_LOG_LEVEL: 'loud' })).toThrow(
        /^invalid configuration:\n {2}QUOTA_LOG_LEVEL: .+ \(got "loud"\)\n {2}QUOTA_REDIS_ULR: unknown variable; did you mean QUOTA_REDIS_URL\? \(QUOTA_STRICT_ENV refuses unknown QUOTA_\* variables\)$/,
      );
      expect(loadConfig({ QUOTA_STRICT_ENV: '0', QUOTA_REDIS_ULR: 'redis://r:6379' }).unknownVariables).toEqual(['QUOTA_REDIS_ULR']);
      expect(loadConfig({ QUOTA_STRICT_ENV: '1', QUOTA_REDIS_URL: 'redis://r:6379' })).toMatchObject({ QUOTA_STRICT_ENV: true, unknownVariables: [] });
    });
  });
});
