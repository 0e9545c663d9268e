import { describe, expect, it } from 'vitest';
import { CallersFileError, parseCallers } from '../../src/config/callers.js';

/** The callers file's `roles`: `admin` opens the admin API; anything else is an error that repeats nothing of the file. */
describe('caller roles', () => {
  const file = (roles: string) => `callers:\n  support:\n    token: support-token-0123456789abcdef\n    policies: ['*']\n${roles}`;

  it('no roles by default; roles: [admin] gives the admin role', () => {
    expect([...parseCallers(file('')).byToken('support-token-0123456789abcdef')!.roles]).toEqual([]);
    expect([...parseCallers(file('    roles: [admin]\n')).byToken('support-token-0123456789abcdef')!.roles]).toEqual(['admin']);
  });

  it('an admin caller needs no policies nor domains; without the role a caller needs one of them', () => {
    const adminOnly = parseCallers('callers:\n  desk:\n    token: support-token-0123456789abcdef\n    roles: [admin]\n').byToken(
      'support-token-0123456789abcdef',
    )!;
    expect([...adminOnly.roles]).toEqual(['admin']);
    expect([...adminOnly.policies!]).toEqual([]);
    expect([...adminOnly.domains!]).toEqual([]);
    expect(() => parseCallers('callers:\n  desk:\n    token: support-token-0123456789abcdef\n    roles: []\n')).toThrow(
      /the 1st caller \(line 2, name sha256 [0-9a-f]{8}\): policies: list the policies this caller may use \(or \["\*"\]\), the rate limit domains it may ask about, or both/,
    );
  });

  it('roles: [gateway] marks a caller of the rate limit service as a proxy; it needs domains', () => {
    const gateway = parseCallers('callers:\n  envoy:\n    token: envoy-token-0123456789abcdef\n    domains: [edge]\n    roles: [gateway]\n').byToken(
      'envoy-token-0123456789abcdef',
    )!;
    expect([...gateway.roles]).toEqual(['gateway']);
    expect(() => parseCallers('callers:\n  envoy:\n    token: envoy-token-0123456789abcdef\n    policies: [orders]\n    roles: [gateway]\n')).toThrow(
      /the 1st caller \(line 2, name sha256 [0-9a-f]{8}\): roles: the gateway role is for callers of the rate limit service: list the domains it may ask about/,
    );
  });

  it('an unknown role is refused, without repeating it', () => {
    const attempt = () => parseCallers(file('    roles: [s3cret-root-role]\n'));
    expect(attempt).toThrow(CallersFileError);
    expect(attempt).toThrow(/the 1st caller \(line 2, name sha256 [0-9a-f]{8}\): roles\.0: invalid value/);
    try {
      attempt();
    } catch (error) {
      expect((error as Error).message).not.toContain('s3cret-root-role');
    }
  });
});
