import { describe, expect, it } from 'vitest';
import { cpuLimit } from '../../src/config/cpu-limit.js';
import { ConfigError, loadConfig } from '../../src/config/env.js';
import { workerCount } from '../../src/config/worker-count.js';

/** A cgroup file system of these files only. */
const files = (contents: Record<string, string>) => (path: string) => contents[path];

describe('the CPU limit the process sees', () => {
  it('cgroup v2: quota over period, rounded up', () => {
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }), 8)).toBe(2);
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu.max': '100000 100000\n' }), 8)).toBe(1);
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu.max': '50000 100000\n' }), 8)).toBe(1);
  });

  it('cgroup v2 without a quota (max): the CPUs of the machine', () => {
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }), 6)).toBe(6);
  });

  it('cgroup v1 in either mount layout; -1 is no quota', () => {
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '250000\n', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' }), 8)).toBe(3);
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '200000', '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000' }), 8)).toBe(2);
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }), 4)).toBe(4);
  });

  it('no cgroup files: the CPUs of the machine; a quota above them is capped to them', () => {
    expect(cpuLimit(files({}), 5)).toBe(5);
    expect(cpuLimit(files({ '/sys/fs/cgroup/cpu.max': '800000 100000' }), 2)).toBe(2);
  });
});

describe('QUOTA_WORKERS', () => {
  const redis = { QUOTA_REDIS_URL: 'redis://127.0.0.1:6379' };

  it('is read as a whole number of processes', () => {
    expect(loadConfig({ ...redis, QUOTA_WORKERS: '4' }).QUOTA_WORKERS).toBe(4);
    expect(loadConfig({ QUOTA_WORKERS: '1' }).QUOTA_WORKERS).toBe(1);
  });

  it.each([
    ['two', 'expected a whole number of processes, e.g. 2'],
    ['1.5', 'expected a whole number of processes, e.g. 2'],
    ['0', 'expected at least 1 process'],
    ['-2', 'expected at least 1 process'],
    ['1000', 'expected at most 256 processes'],
  ])('refuses %s, naming the variable', (value, message) => {
    expect(() => loadConfig({ ...redis, QUOTA_WORKERS: value })).toThrow(ConfigError);
    expect(() => loadConfig({ ...redis, QUOTA_WORKERS: value })).toThrow(`QUOTA_WORKERS: ${message} (got "${value}")`);
  });

  it('refuses more than one worker without Redis: the embedded store is per process', () => {
    expect(() => loadConfig({ QUOTA_WORKERS: '2' })).toThrow(/QUOTA_WORKERS: more than one worker needs Redis \(QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER\)/);
    expect(loadConfig({ QUOTA_WORKERS: '2', QUOTA_REDIS_CLUSTER: '127.0.0.1:7000' }).QUOTA_WORKERS).toBe(2);
  });

  it('unset: the CPU limit with Redis, 1 on the embedded store', () => {
    expect(workerCount(loadConfig(redis), () => 3)).toBe(3);
    expect(workerCount(loadConfig({ QUOTA_REDIS_CLUSTER: '127.0.0.1:7000' }), () => 2)).toBe(2);
    expect(workerCount(loadConfig({}), () => 3)).toBe(1);
    expect(workerCount(loadConfig({ ...redis, QUOTA_WORKERS: '1' }), () => 3)).toBe(1);
  });
});
