import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { connectionErrorHint, connectionErrorLog } from '../../src/store/redis/redis-connection-errors.js';
import { VirtualTimers } from '../support/virtual-timers.js';

const failure = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('Redis connection errors in the log (src/store/redis/redis-connection-errors.ts)', () => {
  it('keeps the errors of the start-up budget; past it, logs each distinct error of a node once as an error, and at debug once connected', () => {
    const lines: { level: number; node: string; code?: string; msg: string }[] = [];
    const timers = new VirtualTimers(0);
    const log = connectionErrorLog(
      createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) })),
      { tls: true, clientCertificate: false },
      { budgetMs: 5_000, timers },
    );
    const reset = failure('ECONNRESET', 'write ECONNRESET');
    const alert = failure('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', 'tlsv13 alert certificate required');
    // ioredis retries every few milliseconds; a refused handshake alternates between two errors.
    for (let i = 0; i < 5; i++) {
      log.onConnectionError(reset, '10.0.0.1:6380');
      log.onConnectionError(alert, '10.0.0.1:6380');
    }
    timers.advance(4_999);
    expect(lines).toEqual([]);
    timers.advance(1);
    log.onConnectionError(reset, '10.0.0.2:6380');
    expect(lines.map((l) => [l.level, l.node, l.code])).toEqual([
      [50, '10.0.0.1:6380', 'ECONNRESET'],
      [50, '10.0.0.1:6380', 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED'],
      [50, '10.0.0.2:6380', 'ECONNRESET'],
    ]);
    lines.length = 0;
    log.connected();
    // Now an outage: the circuit breaker warns; the cause is there at debug, once.
    log.onConnectionError(reset, '10.0.0.1:6380');
    log.onConnectionError(reset, '10.0.0.1:6380');
    expect(lines.map((l) => [l.level, l.msg])).toEqual([[20, 'Redis connection failed']]);
  });

  it('a Redis that answers within the start-up budget leaves no error line: what failed before goes to debug', () => {
    const lines: { level: number; code?: string; msg: string }[] = [];
    const timers = new VirtualTimers(0);
    const log = connectionErrorLog(
      createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) })),
      { tls: false, clientCertificate: false },
      { budgetMs: 5_000, timers },
    );
    log.onConnectionError(failure('ETIMEDOUT', 'connect ETIMEDOUT'), '127.0.0.1:6379');
    timers.advance(1_800);
    log.connected();
    timers.advance(10_000);
    expect(lines.map((l) => [l.level, l.code, l.msg])).toEqual([[20, 'ETIMEDOUT', 'Redis connection failed at start, then connected']]);
  });

  it('hints at the setting to fix', () => {
    const tls = { tls: true, clientCertificate: false };
    expect(connectionErrorHint(failure('SELF_SIGNED_CERT_IN_CHAIN', 'x'), tls)).toMatch(/set QUOTA_REDIS_TLS_CA/);
    expect(connectionErrorHint(failure('ERR_TLS_CERT_ALTNAME_INVALID', 'x'), tls)).toMatch(/subjectAltName must list/);
    expect(connectionErrorHint(failure('ECONNRESET', 'x'), tls)).toMatch(/set QUOTA_REDIS_TLS_CERT and QUOTA_REDIS_TLS_KEY/);
    expect(connectionErrorHint(failure('ECONNRESET', 'x'), { tls: true, clientCertificate: true })).toMatch(/the one in QUOTA_REDIS_TLS_CERT must be signed/);
    expect(connectionErrorHint(failure('ETIMEDOUT', 'x'), tls)).toMatch(/tls-port, not its plain port/);
    // Without TLS a reset or a timeout is just Redis being away: no hint about certificates.
    expect(connectionErrorHint(failure('ECONNRESET', 'x'), { tls: false, clientCertificate: false })).toBeUndefined();
    expect(connectionErrorHint(failure('ECONNREFUSED', 'x'), tls)).toBeUndefined();
  });
});
