import { describe, expect, it } from 'vitest';
import { chooseRedisRuntime } from './redis-container.js';

const never = () => {
  throw new Error('not probed when QUOTA_TEST_REDIS decides');
};

describe('test harness: where the test Redis runs (QUOTA_TEST_REDIS)', () => {
  it('follows QUOTA_TEST_REDIS=process or container without probing anything', () => {
    expect(chooseRedisRuntime('process', { hasBinary: never, hasEngine: never })).toBe('process');
    expect(chooseRedisRuntime('container', { hasBinary: never, hasEngine: never })).toBe('container');
  });

  it('unset: a process where redis-server is here, a container only where it is missing and an engine answers', () => {
    const choose = (hasBinary: boolean, hasEngine: boolean) => chooseRedisRuntime(undefined, { hasBinary: () => hasBinary, hasEngine: () => hasEngine });
    expect(choose(true, true)).toBe('process');
    expect(choose(true, false)).toBe('process');
    expect(choose(false, true)).toBe('container');
    // Neither: the process path, whose error says how to install redis-server.
    expect(choose(false, false)).toBe('process');
    expect(chooseRedisRuntime('', { hasBinary: () => false, hasEngine: () => true })).toBe('container');
  });

  it('refuses any other value, naming the variable', () => {
    expect(() => chooseRedisRuntime('docker', { hasBinary: never, hasEngine: never })).toThrow(
      'QUOTA_TEST_REDIS must be "process" or "container" (or unset), not "docker"',
    );
  });
});
