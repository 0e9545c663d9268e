import { afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';

/** Every process a test started: stopped after it, also when an assertion failed first (an old service would keep running). */
const started: ServiceProcess[] = [];
const start = (env: Record<string, string>) => {
  const service = startServiceProcess(env);
  started.push(service);
  return service;
};
afterEach(async () => {
  for (const service of started.splice(0)) {
    service.signal('SIGKILL');
    await service.exit;
  }
});

/**
 * Unknown QUOTA_* variables at a real start: a typo is named with the closest
 * variable the service knows; under QUOTA_STRICT_ENV the service refuses to
 * start (exit 1), so a misspelt QUOTA_REDIS_URL cannot leave it deciding on
 * the embedded store. Invalid values are quoted in the refusal.
 */
describe('the service process and its environment', () => {
  it('QUOTA_STRICT_ENV=1 with QUOTA_REDIS_ULR: exits 1, naming the variable and the closest known one', async () => {
    const service = start({ QUOTA_STRICT_ENV: '1', QUOTA_REDIS_ULR: 'redis://127.0.0.1:6379' });
    // Exits, rather than listening on the embedded store.
    expect(await Promise.race([service.exit, service.port.then(() => 'listening')])).toBe(1);
    const { stdout, stderr } = service.output();
    expect(stderr).toBe(
      'quota-service: invalid configuration:\n  QUOTA_REDIS_ULR: unknown variable; did you mean QUOTA_REDIS_URL? (QUOTA_STRICT_ENV refuses unknown QUOTA_* variables)\n',
    );
    // Refused before anything started: no store, no port.
    expect(stdout).not.toContain('embedded in-memory store');
  });

  it('without it: starts on the embedded store, and the warning names the closest known variable', async () => {
    const service = start({ QUOTA_REDIS_ULR: 'redis://127.0.0.1:6379' });
    await service.port;
    const warning = await service.logged(/ignoring unknown QUOTA_\* variables/);
    expect(warning).toContain('QUOTA_REDIS_ULR: unknown variable; did you mean QUOTA_REDIS_URL?');
    service.signal('SIGTERM');
    expect(await service.exit).toBe(0);
  });

  it('an invalid value is quoted in the refusal: QUOTA_STORE_TIMEOUT_MS=fast', async () => {
    const service = start({ QUOTA_STORE_TIMEOUT_MS: 'fast' });
    expect(await service.exit).toBe(1);
    expect(service.output().stderr).toBe('quota-service: invalid configuration:\n  QUOTA_STORE_TIMEOUT_MS: expected a number (got "fast")\n');
  });
});
