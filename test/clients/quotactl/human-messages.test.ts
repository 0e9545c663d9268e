import { describe, expect, it } from 'vitest';
import { compactDuration, humanFieldError, unreachableReason } from '../../../clients/quotactl/src/human-messages.js';

// quotactl's words for what grpc-js and the service say (the processes that say them: health.test.ts, rls-and-denials.test.ts).

describe('unreachableReason', () => {
  it("grpc-js's UNAVAILABLE details as a reason; the service's own details are left alone", () => {
    const last = (error: string) => `No connection established. Last error: Error: ${error}. Resolution note: `;
    expect(unreachableReason(last('connect ECONNREFUSED 127.0.0.1:1'))).toMatch(/^connection refused/);
    expect(unreachableReason('Name resolution failed for target dns:nohost.invalid:1: Error: getaddrinfo ENOTFOUND nohost.invalid')).toBe(
      'its host name could not be resolved',
    );
    expect(unreachableReason(last('read ECONNRESET'))).toMatch(/^the connection was reset/);
    expect(unreachableReason(last('self-signed certificate in certificate chain'))).toBe(
      'the TLS handshake failed: self-signed certificate in certificate chain',
    );
    expect(unreachableReason(last('connect ETIMEDOUT 10.0.0.1:50051'))).toBe('the connection timed out');
    expect(unreachableReason('the server is shutting down')).toBeUndefined();
  });
});

describe('humanFieldError', () => {
  it('names the option that sets the field; --ttl in units, --lease-ttl-ms as it is given', () => {
    expect(humanFieldError('ttl_ms: must be a whole number of milliseconds from 0 (never expires) to 31622400000, got 34560000000')).toBe(
      '--ttl (ttl_ms): must be a duration from 0 (never expires) to 366d, got 400d',
    );
    expect(humanFieldError('parameters.concurrency.lease_ttl_ms: at least 1000 ms: a lease must outlive the Renew that keeps it')).toBe(
      '--lease-ttl-ms (parameters.concurrency.lease_ttl_ms): at least 1000 ms: a lease must outlive the Renew that keeps it',
    );
    expect(humanFieldError('identity.tenant: required by limit "team-tenant"')).toBe('identity.tenant: required by limit "team-tenant"');
    expect(humanFieldError('no field here')).toBe('no field here');
  });

  it('compactDuration: the largest units, exactly', () => {
    expect([7_200_000, 30_000, 5_400_000, 250, 31_622_400_000, 90_061_001].map(compactDuration)).toEqual([
      '2h',
      '30s',
      '1h 30m',
      '250ms',
      '366d',
      '1d 1h 1m 1s 1ms',
    ]);
  });
});
